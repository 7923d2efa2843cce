import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'forks',
    projects: [
      {
        test: {
          name: 'unit',
          pool: 'forks',
          include: ['test/agent/**/*.test.ts', 'test/projections/**/*.test.ts', 'test/security/**/*.test.ts', 'test/packaging/**/*.test.ts', 'test/scripts/**/*.test.ts', 'test/bench/**/*.test.ts'],
          // The attacks that need the real control plane sit beside the others, named *.e2e.test.ts.
          exclude: ['**/*.e2e.test.ts', '**/node_modules/**'],
          // Give-up bounds for tests that spawn processes (readers, shells, the Go oracle) on a
          // shared, loaded machine; not performance assertions.
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'e2e',
          pool: 'forks',
          include: ['test/e2e/**/*.test.ts', 'test/localcluster/**/*.test.ts', 'test/security/**/*.e2e.test.ts'],
          globalSetup: ['test/globalSetup.ts'],
          // One shared cluster and one test node: files must not interleave.
          fileParallelism: false,
          // Convergence bounds for a real cluster on a small machine.
          testTimeout: 120_000,
          hookTimeout: 300_000,
        },
      },
    ],
  },
});
