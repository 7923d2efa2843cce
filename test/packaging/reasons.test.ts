// The failure reasons a pod author can see in an Event are documented where they look:
// README's Event table and the runbook of OwnerRefsPodsMisconfigured. A reason added to
// agent/common/errors.ts without its documentation fails here.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FAILURE_REASONS, type FailureReason } from '../../agent/common/errors.ts';

const ROOT = path.join(import.meta.dirname, '..', '..');
const read = (p: string) => readFileSync(path.join(ROOT, p), 'utf8');
const ALL = Object.keys(FAILURE_REASONS) as FailureReason[];
/** The node's own failures: the alert that covers them is OwnerRefsWriteFailures, not the pod author's. */
const NODE_SIDE: FailureReason[] = ['WriteFailed', 'VolumeNotFound'];

/** The backquoted reasons in the one line of `text` that matches `line`. */
function reasonsIn(text: string, line: RegExp): string[] {
  const found = text.split('\n').filter((l) => line.test(l));
  expect(found, `one line matching ${line}`).toHaveLength(1);
  return [...found[0]!.matchAll(/`([A-Z][A-Za-z]+)`/g)].map((m) => m[1]!).filter((r) => r in FAILURE_REASONS);
}

describe('failure reasons in the documents', () => {
  it('README\'s Event table lists every reason an Event can carry', () => {
    const listed = reasonsIn(read('README.md'), /^\| `OwnerRefsProjectionFailed` \|/);
    expect([...listed].sort()).toEqual(ALL.filter((r) => r !== 'VolumeNotFound').sort());
  });

  it('the runbook of OwnerRefsPodsMisconfigured lists every reason that is the pod author\'s', () => {
    const runbook = read('docs/RUNBOOKS.md').split('## OwnerRefsPodsMisconfigured')[1]!.split('\n## ')[0]!;
    const listed = [...runbook.matchAll(/`([A-Z][A-Za-z]+)`/g)].map((m) => m[1]!).filter((r) => r in FAILURE_REASONS);
    expect([...new Set(listed)].sort()).toEqual(ALL.filter((r) => !NODE_SIDE.includes(r)).sort());
  });
});
