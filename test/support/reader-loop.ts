// A reader that plays the pod: reads projected files in a tight loop from another
// process until its stdin closes, then prints {reads, missing, torn} as JSON.
// argv: <allowed.json> where allowed.json maps absolute file paths to the list of
// contents that are acceptable (every version the test writes).
import { readFileSync } from 'node:fs';

const allowed = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Record<string, string[]>;
const sets = Object.entries(allowed).map(([file, versions]) => [file, new Set(versions)] as const);
const stats = { reads: 0, missing: 0, torn: 0, samples: [] as string[] };
let done = false;
process.stdin.on('data', () => {});
// The test that started us failed before stop(): our parent is gone; end quietly.
process.stdout.on('error', () => process.exit(0));
process.stdin.on('end', () => (done = true));

function round(): void {
  for (let i = 0; i < 200; i++) {
    for (const [file, ok] of sets) {
      stats.reads++;
      try {
        const text = readFileSync(file, 'utf8');
        if (!ok.has(text)) {
          stats.torn++;
          if (stats.samples.length < 3) stats.samples.push(`${file}: ${JSON.stringify(text.slice(0, 200))}`);
        }
      } catch (err) {
        stats.missing++;
        if (stats.samples.length < 3) stats.samples.push(`${file}: ${String(err)}`);
      }
    }
  }
  if (done) process.stdout.write(JSON.stringify(stats));
  else setImmediate(round);
}
process.stdout.write('ready\n');
round();
