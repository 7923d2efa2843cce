// Node labels under ownerrefs.dev/ configure the agent on that node, live.
// Pure: labels + the last good settings -> new settings and complaints.

import type { ProjectionOptions } from '../../projections/index.ts';
import { NODE_LABEL, PREFIX } from '../../projections/names.ts';

export interface NodeSettings extends ProjectionOptions {
  /** Stop projecting on this node; files stay exactly as they are. */
  paused: boolean;
}

interface LabelSpec {
  label: string;
  key: keyof NodeSettings;
  default: boolean;
  doc: string;
}

/** The label table, with what each does; docs/reference/node-labels.md is generated from it. */
export const NODE_LABELS: readonly LabelSpec[] = [
  { label: NODE_LABEL.paused, key: 'paused', default: false,
    doc: 'stop projecting on this node; files stay exactly as they are (no updates, no self-heal). Unpausing verifies and updates every volume' },
  { label: NODE_LABEL.envFile, key: 'envFile', default: true, doc: 'write ownerReferences.env; turning it off removes the file the agent wrote' },
  { label: NODE_LABEL.dependentsFile, key: 'dependentsFile', default: true, doc: 'write dependentOwnerReferences; turning it off removes the file the agent wrote' },
  { label: NODE_LABEL.nodeFile, key: 'nodeFile', default: true,
    doc: 'write nodeOwnerReferences (the pod\'s Node as an owner); turning it off removes the file the agent wrote' },
  { label: NODE_LABEL.followOwners, key: 'followOwners', default: false,
    doc: 'write the files controllerChain and workloadOwnerReferences, reading owners\' metadata (the workload annotations are kept current on every node); needs rbac-follow-owners.yaml applied (without it the chains end Forbidden and the Node gets a Warning Event). Turning it off removes both files' },
];

export const DEFAULT_SETTINGS: NodeSettings = Object.freeze(
  Object.fromEntries(NODE_LABELS.map((s) => [s.key, s.default])) as unknown as NodeSettings,
);

export interface InvalidLabel {
  label: string;
  value: string;
  message: string;
}

/**
 * Apply labels on top of `previous`. An absent label means its default; an invalid
 * value keeps the previous (last good) setting for that key and is reported.
 */
export function settingsFromLabels(
  labels: Record<string, string> | null | undefined,
  previous: NodeSettings = DEFAULT_SETTINGS,
): { settings: NodeSettings; invalid: InvalidLabel[] } {
  const settings = { ...previous };
  const invalid: InvalidLabel[] = [];
  for (const spec of NODE_LABELS) {
    const value = labels?.[spec.label];
    if (value === undefined) settings[spec.key] = spec.default;
    else if (value === 'true' || value === 'false') settings[spec.key] = value === 'true';
    else {
      invalid.push({
        label: spec.label,
        value,
        message: `node label ${spec.label}=${JSON.stringify(value)} is invalid: use "true" or "false"; keeping ${spec.label}=${previous[spec.key]}`,
      });
    }
  }
  // A label that is one of ours but for case or dashes (followOwners for follow-owners) is
  // a typo an operator would otherwise never hear of: the setting silently keeps its default.
  const known = new Map(NODE_LABELS.map((s) => [squash(s.label), s.label]));
  for (const [label, value] of Object.entries(labels ?? {})) {
    if (!label.startsWith(PREFIX) || NODE_LABELS.some((s) => s.label === label)) continue;
    const meant = known.get(squash(label));
    if (meant) invalid.push({ label, value, message: `node label ${label} is not one of the agent's: did you mean ${meant}? It is ignored` });
  }
  return { settings, invalid };
}


/** A label name without case or separators, to catch followOwners for follow-owners. */
function squash(label: string): string {
  return label.toLowerCase().replace(/[^a-z0-9/]/g, '');
}

export function sameSettings(a: NodeSettings, b: NodeSettings): boolean {
  return NODE_LABELS.every((s) => a[s.key] === b[s.key]);
}
