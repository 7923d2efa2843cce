// Writes charts/ownerrefs-agent/README.md: how to install the chart, and its values as one
// table made from values.schema.json (each key, its type and what it accepts) and values.yaml
// (its default, and the comment above it when the schema has no description).
// test/packaging/chart.test.ts fails when the README drifts from them.
//   npm run gen:chart-readme
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { isMap, isPair, isScalar, parseDocument, type YAMLMap } from 'yaml';

const CHART = path.join(import.meta.dirname, '..', 'charts', 'ownerrefs-agent');

interface Schema {
  type?: string | string[];
  description?: string;
  enum?: unknown[];
  pattern?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
}

/** The comment above each key of values.yaml, by dotted path. */
function comments(map: YAMLMap, prefix: string, out: Map<string, string>): Map<string, string> {
  map.items.forEach((pair, i) => {
    if (!isPair(pair) || !isScalar(pair.key)) return;
    const key = `${prefix}${String(pair.key.value)}`;
    // The yaml library keeps the first key's comment on the map itself.
    const text = (pair.key.commentBefore ?? (i === 0 ? map.commentBefore : undefined))?.trim();
    if (text) out.set(key, text.split('\n').map((l) => l.trim()).join(' '));
    if (isMap(pair.value)) comments(pair.value, `${key}.`, out);
  });
  return out;
}

function typeOf(s: Schema): string {
  if (s.enum) return s.enum.map((v) => `\`${String(v)}\``).join(', ');
  const t = Array.isArray(s.type) ? s.type.join(' or ') : s.type ?? 'any';
  return t === 'array' && s.items?.type ? `array of ${String(s.items.type)}` : t;
}

const cell = (v: string) => v.replaceAll('|', '\\|').replaceAll('\n', ' ');

export function chartReadme(): string {
  const schema = JSON.parse(readFileSync(path.join(CHART, 'values.schema.json'), 'utf8')) as Schema;
  const doc = parseDocument(readFileSync(path.join(CHART, 'values.yaml'), 'utf8'));
  const defaults = doc.toJS() as Record<string, unknown>;
  const notes = comments(doc.contents as YAMLMap, '', new Map());
  const rows: string[] = [];
  const walk = (s: Schema, at: string[], value: unknown, parentNote: string | undefined) => {
    let inherited = parentNote; // the parent's comment explains its first value
    for (const [k, sub] of Object.entries(s.properties ?? {})) {
      const p = [...at, k];
      const key = p.join('.');
      const v = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[k] : undefined;
      const own = sub.description ?? notes.get(key);
      const nested = v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 0;
      if (sub.properties && Object.keys(sub.properties).length > 0 && nested) {
        walk(sub, p, v, own ?? inherited);
        inherited = undefined;
        continue;
      }
      const what = own ?? inherited ?? '';
      inherited = undefined;
      rows.push(`| \`${key}\` | ${cell(typeOf(sub))} | \`${cell(JSON.stringify(v ?? null))}\` | ${cell(what)} |`);
    }
  };
  walk(schema, [], defaults, undefined);
  return `# ownerrefs-agent chart

The agent on every Linux node, its RBAC and the ValidatingAdmissionPolicy that bounds it, the
\`CSIDriver\` (CSI mode), and, with \`webhook.enabled\`, the admission webhook that makes
KEP-4753's syntax valid. \`daemonset.yaml\` at the repository's root is this chart rendered with
its defaults. The project's README and docs/ say what each part does.

\`\`\`sh
helm install ownerrefs-agent charts/ownerrefs-agent --set webhook.enabled=true
helm uninstall ownerrefs-agent
\`\`\`

Every namespaced object goes into \`namespaceOverride\` if set, else the release's namespace
(\`helm install -n NS\`), else, for a release in \`default\`, \`namespace.name\`
(\`ownerrefs-system\`). The chart makes that namespace, labelled for the Pod Security level the
agent needs; one that exists already (\`--create-namespace\` made it) is left as it is, and the
install is refused, saying so, only where its \`pod-security.kubernetes.io/enforce\` level is
not \`privileged\`. \`values.schema.json\` refuses any other value.

## Values

Generated from \`values.schema.json\` and \`values.yaml\` (\`npm run gen:chart-readme\`).

| Key | Type | Default | Description |
|---|---|---|---|
${rows.join('\n')}
`;
}

if (import.meta.main) writeFileSync(path.join(CHART, 'README.md'), chartReadme());
