// Builds and runs test/projections/gooracle: real Go encoding/json over real
// metav1.OwnerReference, the reference our renderer must match byte for byte.

import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { OwnerReference } from '../../projections/index.ts';

const dir = path.join(import.meta.dirname, '..', 'projections', 'gooracle');
let binary: string | undefined;

/** Compiles once per test file (Go's build cache makes repeats fast). */
export function buildOracle(): void {
  binary = path.join(mkdtempSync(path.join(os.tmpdir(), 'gooracle-')), 'oracle');
  execFileSync('go', ['build', '-o', binary, '.'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
}

export function goMarshal(owners: readonly OwnerReference[]): string {
  if (!binary) throw new Error('call buildOracle() in beforeAll');
  // undefined fields are dropped by JSON.stringify: Go then sees a nil *bool, as intended.
  return execFileSync(binary, { input: JSON.stringify(owners) }).toString('utf8');
}

/** Each document of a YAML stream as kubectl reads it (sigs.k8s.io/yaml: YAML 1.1 with Go's resolution). */
export function goYamlToJson(yaml: string): unknown[] {
  if (!binary) throw new Error('call buildOracle() in beforeAll');
  return execFileSync(binary, ['yaml2json'], { input: yaml }).toString('utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as unknown);
}
