// Pod-controlled text in messages (problems, Events, log lines, CSI and admission errors):
// one way to quote it and one way to bound it, shared by the projections and the agent.

/**
 * Quote pod-controlled text for messages, bounded so it cannot flood logs or Events, with
 * everything outside printable ASCII escaped: a look-alike (Cyrillic "о" in "pоdinfo") or
 * an invisible character shows as \u043e instead of passing for what it imitates.
 */
export function describe(s: string, max = 80): string {
  const body = JSON.stringify(s.length > max ? s.slice(0, max) : s).slice(1, -1)
    .replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return `"${body}${s.length > max ? `…(${s.length} chars)` : ''}"`;
}

/** `s` cut at `max` characters, saying how long it was: for whole messages and log fields. */
export function clip(s: string, max: number): string {
  return s.length > max ? `${s.slice(0, max)}…(${s.length} chars)` : s;
}
