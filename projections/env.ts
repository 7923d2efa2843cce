// Env material: `OWNER_REFERENCES='<json>'` plus a newline, for `set -a; . file`.
//
// POSIX single quotes make every byte literal except the quote itself, which is
// written as '\'' (close, escaped quote, reopen). Go's JSON never contains a raw
// newline or NUL, so the value is exactly one line and survives any POSIX sh.

export const ENV_VAR_NAME = 'OWNER_REFERENCES';

export function shSingleQuote(value: string): string {
  return "'" + value.replaceAll("'", "'\\''") + "'";
}

export function renderEnvLine(name: string, value: string): string {
  return `${name}=${shSingleQuote(value)}\n`;
}
