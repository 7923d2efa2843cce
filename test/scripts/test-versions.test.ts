// The table npm run test:versions writes into INSTALL.md: one row per release, newest first,
// each file's verdict, and the admission mode a release allows (policy mode is skipped where
// the API server has no MutatingAdmissionPolicy v1).
import { describe, expect, it } from 'vitest';
import { versionsTable, type FileResult, type ReleaseResult } from '../../scripts/test-versions.ts';

const ok = (over: Partial<FileResult> = {}): FileResult => ({ passed: 3, failed: 0, skipped: 0, failures: [], skips: [], ...over });
const release = (minor: string, conformance: FileResult, kep: FileResult = ok()): ReleaseResult =>
  ({ minor, version: `v${minor}.1`, date: '2026-01-01', seconds: 1, files: { 'test/e2e/conformance.test.ts': conformance, 'test/e2e/kep.test.ts': kep } });
const POLICY_SKIPPED = ok({ passed: 2, skipped: 1, skips: ['specs on the real node in policy mode, with no webhook process or configuration, all pass'] });

describe('versionsTable', () => {
  it.each([
    { case: 'every file passed, policy mode too', r: release('1.36', ok()), row: '| 1.36 (v1.36.1) | `policy` or `webhook` | passes | passes |' },
    { case: 'policy mode skipped: the webhook only', r: release('1.31', POLICY_SKIPPED), row: '| 1.31 (v1.31.1) | `webhook` | passes | passes |' },
    { case: 'a failed test', r: release('1.32', POLICY_SKIPPED, ok({ failed: 1, failures: ['x'] })), row: '| 1.32 (v1.32.1) | `webhook` | passes | **fails** (bench/results/versions.json) |' },
    { case: 'a file that did not run', r: release('1.33', ok({ passed: 0, failures: ['the file did not run'] })), row: '| 1.33 (v1.33.1) | `policy` or `webhook` | **fails** (bench/results/versions.json) | passes |' },
  ])('$case', ({ r, row }) => {
    expect(versionsTable({ releases: [r] }).split('\n')[2]).toBe(row);
  });

  it('lists the newest release first, whatever the order of the results', () => {
    const rows = versionsTable({ releases: [release('1.30', POLICY_SKIPPED), release('1.36', ok()), release('1.31', POLICY_SKIPPED)] }).split('\n').slice(2);
    expect(rows.map((l) => l.split(' ')[1])).toEqual(['1.36', '1.31', '1.30']);
  });
});
