// Builds and runs localcluster/node/k8s/downwardoracle: the kubelet's own downwardAPI
// volume code (CollectData) over a pod, a volume source and the node's allocatable. The
// files projections/downwardapi.ts renders must equal its answer byte for byte.

import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { DownwardAPISource, DownwardPod, ResourceList } from '../../projections/downwardapi.ts';

const dir = path.join(import.meta.dirname, '..', '..', 'localcluster', 'node', 'k8s');
let binary: string | undefined;

/** Compiles once per test file (cold: a minute, as it builds part of the kubelet; Go's cache makes repeats fast). */
export function buildDownwardOracle(): void {
  binary = path.join(mkdtempSync(path.join(os.tmpdir(), 'downwardoracle-')), 'oracle');
  execFileSync('go', ['build', '-o', binary, './downwardoracle'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
}

export interface OracleFiles {
  /** Cleaned path -> mode and text. */
  files: Record<string, { mode: number; text: string }>;
  error?: string;
}

export function kubeletCollect(pod: DownwardPod, source: DownwardAPISource, allocatable: ResourceList = {}): OracleFiles {
  if (!binary) throw new Error('call buildDownwardOracle() in beforeAll');
  const out = JSON.parse(execFileSync(binary, { input: JSON.stringify({ pod, source, allocatable }) }).toString('utf8')) as
    { files: Record<string, { mode: number; data: string | null }>; error?: string };
  const files = Object.fromEntries(Object.entries(out.files).map(([p, f]) => [p, { mode: f.mode, text: Buffer.from(f.data ?? '', 'base64').toString('utf8') }]));
  return out.error === undefined ? { files } : { files, error: out.error };
}
