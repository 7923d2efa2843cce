// The user docs hold together: links resolve, the README stays a front door, the pages carry
// no history, generated sections match their sources, and every shell block is either run by
// test/e2e/docs.test.ts or says why not.

import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dataPath, withDiagram, CONCEPTS } from '../../scripts/gen-diagrams.ts';
import { FILES, INSTALL, releases, RESULTS, withVersionsTable, type VersionsFile } from '../../scripts/test-versions.ts';
import { asDryRun, consoleSteps, exampleCommands, outputMatches, ROOT, shellBlocks, userDocs } from '../support/docblocks.ts';

const read = (f: string) => readFileSync(path.join(ROOT, f), 'utf8');
const PAGES = [...userDocs(), 'charts/ownerrefs-agent/README.md', 'localcluster/README.md'];

/** GitHub's anchor for a heading. */
const slug = (h: string) => h.trim().toLowerCase().replace(/[`*_]/g, '').replace(/[^\p{L}\p{N} -]/gu, '').replace(/ /g, '-');
const anchors = (file: string) => new Set(read(file).split('\n').filter((l) => /^#{1,6} /.test(l)).map((l) => slug(l.replace(/^#+ /, ''))));
/** Markdown links outside code blocks and code spans. */
function links(file: string): string[] {
  const prose = read(file).replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

describe('the docs', () => {
  it.each(PAGES)('%s: every relative link names a file that exists, and a heading in it', (file) => {
    const broken = links(file).filter((l) => !/^[a-z]+:/.test(l)).filter((l) => {
      const [target, anchor] = l.split('#');
      const resolved = target ? path.join(path.dirname(file), target) : file;
      if (!existsSync(path.join(ROOT, resolved))) return true;
      return anchor !== undefined && resolved.endsWith('.md') && !anchors(resolved).has(anchor);
    });
    expect(broken).toEqual([]);
  });

  it.each([...new Set(['SECURITY.md', ...PAGES])])('%s: every source or test file it names in a code span exists (a claim cites a test that can run)', (file) => {
    const named = [...read(file).matchAll(/`((?:test|agent|projections|localcluster|scripts|charts)\/[\w./-]+\.(?:ts|yaml|sh))`/g)].map((m) => m[1]!);
    expect(named.filter((f) => !existsSync(path.join(ROOT, f)))).toEqual([]);
  });

  it('README is a front door: at most 150 lines, the two commands first', () => {
    const readme = read('README.md');
    expect(readme.split('\n').length).toBeLessThanOrEqual(150);
    expect(shellBlocks('README.md')[0]!.body).toMatch(/^npm ci && npm run demo .*\nnpm ci && npm test /);
  });

  it.each(userDocs().filter((f) => f !== 'CHANGELOG.md'))('%s tells no history: no issue numbers, commit hashes or per-run clock times', (file) => {
    const text = read(file);
    expect(text.match(/\b[Ii]ssues? #?\d+\b/g) ?? []).toEqual([]);
    // A commit hash: 7 to 40 hex digits with a digit and a letter, not part of a UID or a digest.
    const hashes = [...text.matchAll(/(?<![\w:-])[0-9a-f]{7,40}(?![\w-])/g)].map((m) => m[0]).filter((h) => /\d/.test(h) && /[a-f]/.test(h));
    expect(hashes).toEqual([]);
    expect(text.match(/\b20\d\d-\d\d-\d\d \d\d:\d\d\b/g) ?? []).toEqual([]);
  });

  it('CONCEPTS.md holds the data-path diagram made from the code (npm run gen:diagrams)', () => {
    const doc = readFileSync(CONCEPTS, 'utf8');
    expect(doc).toBe(withDiagram(doc));
    expect(doc).toContain(dataPath());
  });

  it('INSTALL.md\'s table of supported versions is written from bench/results/versions.json, which has every release of the range, each file run on each (npm run test:versions)', () => {
    const results = JSON.parse(readFileSync(RESULTS, 'utf8')) as VersionsFile;
    const doc = readFileSync(INSTALL, 'utf8');
    expect(doc).toBe(withVersionsTable(doc, results));
    expect(results.releases.map((r) => [r.minor, r.version]).sort()).toEqual(releases().sort());
    for (const r of results.releases) expect(Object.keys(r.files).sort(), r.version).toEqual([...FILES].sort());
  });

  it('the architecture page names every module of agent/ and projections/', () => {
    const page = read('docs/contributing/architecture.md');
    const modules = (dir: string): string[] => readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((d) =>
      d.isDirectory() ? modules(path.join(dir, d.name)) : /\.ts$/.test(d.name) && !d.name.endsWith('.d.ts') ? [d.name] : []);
    expect([...modules('agent'), ...modules('projections')].filter((m) => !page.includes(m) && m !== 'index.ts' && m !== 'types.ts')).toEqual([]);
  });

  it('every example is shown by a page', () => {
    const shown = userDocs().map(read).join('\n');
    const files = (dir: string): string[] => readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((d) =>
      d.isDirectory() ? files(path.join(dir, d.name)) : [path.join(dir, d.name)]);
    expect(files('examples').filter((f) => !shown.includes(f))).toEqual([]);
  });

  it.each(userDocs())('%s: every shell block is sh or console, and a block not run as written says why', (file) => {
    const text = read(file);
    expect(text.match(/^```(bash|shell|zsh)\s*$/gm) ?? []).toEqual([]);
    for (const b of shellBlocks(file)) {
      if (b.how !== 'run') expect(b.reason, `${file}:${b.line}`).toMatch(/\S/);
      if (b.lang === 'console') expect(consoleSteps(b.body).length, `${file}:${b.line}`).toBeGreaterThan(0);
    }
  });
});

describe('how the docs test reads a page', () => {
  it('matches shown output line by line, … standing for anything within a line', () => {
    expect(outputMatches(['{"uid":"…"}'], '{"uid":"1234"}\n')).toBe(true);
    expect(outputMatches(['{"uid":"…"}'], '{"uid":"1234"}\nmore\n')).toBe(false);
    expect(outputMatches(['a', 'b'], 'a\nc\n')).toBe(false);
    expect(outputMatches(['x.y'], 'xzy\n')).toBe(false); // no regex meaning leaks from the page
  });

  it('makes helm installs and kubectl applies dry runs, and leaves other lines', () => {
    expect(asDryRun('helm install a b --set x=1   # why\nkubectl apply -f c.yaml\nkubectl get pods')).toBe(
      'helm install a b --set x=1 --dry-run=client # why\nkubectl apply -f c.yaml --dry-run=server\nkubectl get pods');
    expect(asDryRun('helm install a b \\\n  --set x=1')).toBe('helm install a b --set x=1 --dry-run=client');
  });

  it('reads the commands of an example\'s leading comment, and nothing after it', () => {
    expect(exampleCommands('# intro\n#\n#   kubectl apply -f x.yaml\n#   kubectl logs y   # note\napiVersion: v1\n#   kubectl no')).toEqual(['kubectl apply -f x.yaml', 'kubectl logs y   # note']);
  });
});
