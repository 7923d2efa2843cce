// The failure reasons a pod author can see in an Event are documented where they look:
// the reference's Event page and the runbook of OwnerRefsPodsMisconfigured. A reason added to
// agent/common/errors.ts without its documentation fails here.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FAILURE_REASONS, NODE_SIDE_REASONS, type FailureReason } from '../../agent/common/errors.ts';

const ROOT = path.join(import.meta.dirname, '..', '..');
const read = (p: string) => readFileSync(path.join(ROOT, p), 'utf8');
const ALL = Object.keys(FAILURE_REASONS) as FailureReason[];

describe('failure reasons in the documents', () => {
  it('the reference\'s Event page lists every reason an Event can carry, in its table of failure reasons', () => {
    const page = read('docs/reference/events.md');
    expect(page).toMatch(/^\| `OwnerRefsProjectionFailed` \|/m);
    const section = page.split('\n## Failure reasons\n')[1]!;
    const listed = [...section.matchAll(/^\| `([A-Z][A-Za-z]+)` \|/gm)].map((m) => m[1]!);
    expect([...listed].sort()).toEqual([...ALL].sort());
  });

  it('the runbook of OwnerRefsPodsMisconfigured lists every reason that is the pod author\'s', () => {
    const runbook = read('docs/RUNBOOKS.md').split('## OwnerRefsPodsMisconfigured')[1]!.split('\n## ')[0]!;
    const listed = [...runbook.matchAll(/`([A-Z][A-Za-z]+)`/g)].map((m) => m[1]!).filter((r) => r in FAILURE_REASONS);
    expect([...new Set(listed)].sort()).toEqual(ALL.filter((r) => !NODE_SIDE_REASONS.includes(r)).sort());
  });
});
