// The lines of a watch response: one JSON event per line (the API server's watch framing
// for application/json), decoded across chunk boundaries and bounded in length.

import { StringDecoder } from 'node:string_decoder';

/**
 * Calls `onLine` with each non-blank line of `body`, in order, until it ends. `onBytes` is
 * called per chunk (the stall watchdog). A line longer than `maxChars` fails the read
 * instead of being held whole; what `onLine` throws ends the read too.
 */
export async function readLines(body: AsyncIterable<unknown>, maxChars: number, onBytes: () => void,
  onLine: (line: string) => void, what = 'watch'): Promise<void> {
  let buf = '';
  // One decoder across chunks: a character split between two reads must not become U+FFFD.
  const utf8 = new StringDecoder('utf8');
  for await (const chunk of body) {
    onBytes();
    // Only the new text can hold the next newline: scanning the whole buffer again on
    // every chunk made a long line cost quadratic time.
    let from = buf.length;
    buf += utf8.write(chunk as Buffer);
    let start = 0;
    let nl: number;
    while ((nl = buf.indexOf('\n', from)) >= 0) {
      const line = buf.slice(start, nl);
      start = from = nl + 1;
      if (line.trim() !== '') onLine(line);
    }
    if (start > 0) buf = buf.slice(start);
    if (buf.length > maxChars) throw new Error(`a ${what} event is longer than ${maxChars} characters`);
  }
}
