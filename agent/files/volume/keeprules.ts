// Step 3a of the writer (writer.ts): which files with a KeepRule stay as they are on disk.
// A rule belongs to a file whose answer is not settled (projections/types.ts): the file in
// place stays if it agrees, and the files of one group stay together or not at all.
// Pure over `read`, which the writer gives: the agent-owned bytes in place, or undefined.

import type { KeepRule, ProjectedFile } from '../../../projections/index.ts';

/** A file in place: its bytes and its stamp (writer.ts). */
export interface InPlace {
  bytes: Buffer;
  stamp: string;
}

type Derive = NonNullable<KeepRule['matches']>['derive'];

/** File path -> what is in place, for each file of a group whose every file agrees with its rule. */
export async function keptGroups(files: readonly ProjectedFile[], read: (f: ProjectedFile) => Promise<InPlace | undefined>): Promise<Map<string, InPlace>> {
  const kept = new Map<string, InPlace>();
  const groups = new Map<string, ProjectedFile[]>();
  for (const f of files) if (f.keep) groups.set(f.keep.group, [...groups.get(f.keep.group) ?? [], f]);
  for (const group of groups.values()) {
    const inPlace = new Map<string, InPlace>();
    for (const f of group) {
      const old = await read(f);
      if (!old || !f.keep!.prefixes.some((p) => old.bytes.subarray(0, p.length).equals(p))) break;
      inPlace.set(f.path, old);
    }
    if (inPlace.size === group.length && derivedAgree(group, inPlace)) for (const [path, old] of inPlace) kept.set(path, old);
  }
  return kept;
}

/** Each file with `matches` is exactly what its rule derives from the named file of its group. */
function derivedAgree(group: readonly ProjectedFile[], inPlace: ReadonlyMap<string, InPlace>): boolean {
  const derived = new Map<Derive, Map<string, Buffer | undefined>>(); // once per rule and source, however many items share them
  return group.every((f) => {
    const m = f.keep!.matches;
    if (!m) return true;
    const from = inPlace.get(m.of);
    if (from === undefined) return false;
    const byRule = derived.get(m.derive) ?? derived.set(m.derive, new Map()).get(m.derive)!;
    if (!byRule.has(m.of)) byRule.set(m.of, m.derive(from.bytes));
    return byRule.get(m.of)?.equals(inPlace.get(f.path)!.bytes) === true;
  });
}
