// The layering rules of docs/contributing/architecture.md ("What may import what"), read from
// the page itself, and the imports of the code as TypeScript's own scanner reads them, so that
// the page and the code cannot drift apart.
//
// A row names a unit (a folder ending in `/`, or one file) and what it may import: other units
// by name, or a whole tree with `**` (`agent/**`), and after a colon, why. A file belongs to the longest unit that
// covers it. Every file may import its own unit and the files beside it in its folder.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

export interface Rule { unit: string; mayImport: string[] }
/** One relative import of one file: paths from the repository root. */
export interface Import { from: string; line: number; to: string }

export class LayeringError extends Error {}

const HEADING = '## What may import what';

/** The rules table under the page's heading; a page without one is an error, not no rules. */
export function parseRules(markdown: string): Rule[] {
  const at = markdown.indexOf(`\n${HEADING}\n`);
  if (at < 0) throw new LayeringError(`no "${HEADING}" section`);
  const section = markdown.slice(at + HEADING.length + 2).split(/\n## /)[0]!;
  // The table's rows, less its header and separator lines.
  const rows = section.split('\n').filter((l) => l.startsWith('|')).slice(2);
  const rules = rows.map((row) => {
    const [unitCell = '', importCell = ''] = row.split('|').slice(1, 3);
    const unit = /`([^`]+)`/.exec(unitCell)?.[1];
    if (!unit) throw new LayeringError(`a row without a unit: ${row}`);
    // After a colon, the cell gives its reason: code spans there are prose, not rules.
    const list = importCell.split(/:\s/)[0]!;
    return { unit, mayImport: [...list.matchAll(/`([^`]+)`/g)].map((m) => m[1]!) };
  });
  if (rules.length === 0) throw new LayeringError(`"${HEADING}" has no rows`);
  return rules;
}

/** The unit that covers a file: the longest row naming it or a folder above it. */
export function unitOf(rules: readonly Rule[], file: string): string | undefined {
  let best: string | undefined;
  for (const { unit } of rules) {
    const covers = unit.endsWith('/') ? file.startsWith(unit) : file === unit;
    if (covers && (best === undefined || unit.length > best.length)) best = unit;
  }
  return best;
}

/** Each import the rules do not allow, as one line that names the import and the rule. */
export function violations(rules: readonly Rule[], imports: readonly Import[]): string[] {
  const byUnit = new Map(rules.map((r) => [r.unit, r]));
  const out: string[] = [];
  for (const imp of imports) {
    const from = unitOf(rules, imp.from);
    if (from === undefined) { out.push(`${imp.from}: no row of the table covers this file`); continue; }
    const to = unitOf(rules, imp.to);
    if (to === undefined || to === from || path.dirname(imp.to) === path.dirname(imp.from)) continue;
    const allowed = byUnit.get(from)!.mayImport;
    const ok = allowed.some((e) => e.endsWith('**') ? imp.to.startsWith(e.slice(0, -2)) : e === to);
    if (!ok) out.push(`${imp.from}:${imp.line} imports ${imp.to}: ${from} may import ${allowed.length ? allowed.join(', ') : 'nothing of ours'}`);
  }
  return out;
}

const CODE = /\.(ts|mts|js|mjs)$/;

/** Every relative import (static, re-export or dynamic) of the code under the given folders. */
export function importsUnder(root: string, dirs: readonly string[]): Import[] {
  const files = (dir: string): string[] => readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((d) => {
    const rel = path.join(dir, d.name);
    if (d.isDirectory()) return d.name === 'node_modules' ? [] : files(rel);
    return CODE.test(d.name) && !d.name.endsWith('.d.ts') ? [rel] : [];
  });
  return dirs.flatMap(files).flatMap((file) => {
    const text = readFileSync(path.join(root, file), 'utf8');
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest);
    return ts.preProcessFile(text, true, true).importedFiles.filter((i) => i.fileName.startsWith('.')).map((i) => ({
      from: file,
      line: source.getLineAndCharacterOfPosition(i.pos).line + 1,
      to: path.normalize(path.join(path.dirname(file), i.fileName)),
    }));
  });
}

/** Code files the table must cover: every file under the folders, imported or not. */
export function filesUnder(root: string, dirs: readonly string[]): string[] {
  const walk = (dir: string): string[] => readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((d) => {
    const rel = path.join(dir, d.name);
    if (d.isDirectory()) return d.name === 'node_modules' ? [] : walk(rel);
    return CODE.test(d.name) ? [rel] : [];
  });
  return dirs.flatMap(walk);
}
