import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentVersion } from '../../agent/version.ts';
import { tmpDir } from '../support/tmpdir.ts';

describe('agentVersion', () => {
  /** A tree: `files` (path -> package.json object) under a scratch root; the root. */
  const tree = (files: Record<string, object>) => {
    const root = tmpDir('version-');
    for (const [p, pkg] of Object.entries(files)) {
      mkdirSync(path.join(root, p), { recursive: true });
      writeFileSync(path.join(root, p, 'package.json'), JSON.stringify(pkg));
    }
    return root;
  };
  it.each([
    ['the checkout: one level up', { '.': { name: 'ownerrefs-agent', version: '1.2.3' } }, 'agent', '1.2.3'],
    ['the image: two levels up', { app: { name: 'ownerrefs-agent', version: '1.2.4' } }, 'app/dist/agent', '1.2.4'],
    ['another package.json on the way is skipped', { app: { name: 'ownerrefs-agent', version: '1.2.5' }, 'app/dist': { type: 'module' } }, 'app/dist/agent', '1.2.5'],
    ['none: unknown', {}, 'x/y', 'unknown'],
  ])('%s', (_name, files, from, want) => {
    const root = tree(files);
    mkdirSync(path.join(root, from), { recursive: true });
    expect(agentVersion(path.join(root, from))).toBe(want);
  });
});
