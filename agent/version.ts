// The agent's version: package.json's, the one version of the image, chart and manifests
// (CHANGELOG.md). Read where the code runs from: the checkout (agent/, one level down) or the
// image (/app/dist/agent/, two levels down; the Dockerfile copies package.json to /app).

import { readFileSync } from 'node:fs';
import path from 'node:path';

/** The nearest package.json above this module that is ours; its version, or 'unknown'. */
export function agentVersion(from: string = import.meta.dirname): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'ownerrefs-agent' && typeof pkg.version === 'string') return pkg.version;
    } catch { /* none here: look higher */ }
    if (path.dirname(dir) === dir) return 'unknown';
  }
}
