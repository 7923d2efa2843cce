// A downwardAPI volume's items, validated as the API server validates them and rendered
// as the kubelet renders them, plus one field the kubelet lacks: metadata.ownerReferences
// in the KEP-4753 format. Pure: pod (and node allocatable) in, files out.
//
// Retired form, still served: nothing new is made in it. The agent's CSI driver renders
// here an ownerrefs.dev CSI volume whose attribute
// `downwardAPI` holds a downwardAPI volume source as JSON (written by hand, or stored in a
// template by earlier versions of the webhook, which made that of the KEP's syntax; the
// webhook now points the syntax at pod annotations the kubelet renders: annotations.ts). The
// API server never validates the attribute, so it is validated here as it would.
//
// Rendering follows the kubelet (pkg/volume/downwardapi CollectData, pkg/fieldpath and
// pkg/api/v1/resource): paths are cleaned, the item's mode or else defaultMode, labels and
// annotations as sorted key="value" lines (Go %q values), resources rounded up after
// dividing by the divisor, limits falling back to the node's allocatable.

import { formatMap } from './goquote.ts';
import { keepWhileUnsettled, renderChainJson, renderNodeOwnerJson, renderWorkloadJson, type ControllerChain, type NodeRef } from './chain.ts';
import { renderOwnerReferencesJson } from './ownerreferences.ts';
import { describe } from './describe.ts';
import { equal, goCeilRatio, isZero, milliValue, parseQuantity, value, type Rational } from './quantity.ts';
import { isRecord, type KeepRule, type OwnerReference, type ProjectedFile } from './types.ts';
import { EXTENSION_FIELDS, OWNER_REFERENCES_FIELD } from './names.ts';

/** Field paths only the agent serves (the API server knows none of them). */
const AGENT_FIELDS: readonly string[] = [OWNER_REFERENCES_FIELD, ...Object.values(EXTENSION_FIELDS)];
/** What the API server defaults defaultMode to (0644). */
export const DEFAULT_MODE = 0o644;
/** Bounds on hostile input; the kubelet's own limits are 4096 bytes per path, 255 per name. */
export const MAX_ITEMS = 128;
const MAX_PATH = 4096;
/** Names the agent's writer uses for its temporaries (agent/files/volume/writer.ts); no item may use them. */
export const RESERVED_NAME_PREFIX = '.ownerrefs-tmp.';
const MAX_NAME = 255;
/**
 * Most names in one item's path (the file and the directories above it). The kubelet allows
 * any depth within 4096 bytes, but the agent's writer opens each directory on its own, with
 * O_NOFOLLOW, on every write: 128 items 2,000 deep were 260,000 opens per change of one pod.
 */
export const MAX_DEPTH = 32;

export interface ObjectFieldRef { apiVersion?: string; fieldPath: string }
export interface ResourceFieldRef { containerName?: string; resource: string; divisor?: string | number }
export interface DownwardAPIItem {
  path: string;
  fieldRef?: ObjectFieldRef;
  resourceFieldRef?: ResourceFieldRef;
  mode?: number;
}
/** The downwardAPI volume source (or a projected volume's downwardAPI source plus the volume's defaultMode). */
export interface DownwardAPISource {
  items?: DownwardAPIItem[];
  defaultMode?: number;
}

export type ResourceList = Readonly<Record<string, string | number>>;
interface ContainerView { name?: string; resources?: { limits?: ResourceList | null; requests?: ResourceList | null } | null }

/** The parts of a pod the items read. */
export interface DownwardPod {
  metadata?: {
    name?: string | undefined;
    namespace?: string | undefined;
    uid?: string | undefined;
    labels?: Readonly<Record<string, string>> | null | undefined;
    annotations?: Readonly<Record<string, string>> | null | undefined;
    ownerReferences?: readonly OwnerReference[] | null | undefined;
  } | undefined;
  spec?: { containers?: readonly ContainerView[] | null; initContainers?: readonly ContainerView[] | null } | undefined;
}

const FIELDS = new Set(['metadata.name', 'metadata.namespace', 'metadata.labels', 'metadata.annotations', 'metadata.uid', ...AGENT_FIELDS]);
const RESOURCES = new Set(['limits.cpu', 'limits.memory', 'limits.ephemeral-storage', 'requests.cpu', 'requests.memory', 'requests.ephemeral-storage']);
const HUGEPAGES = ['requests.hugepages-', 'limits.hugepages-'];
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** validation.IsQualifiedName: [prefix/]name, prefix a DNS-1123 subdomain, name at most 63. */
export function isQualifiedName(s: string): boolean {
  const parts = s.split('/');
  if (parts.length > 2) return false;
  const name = parts.at(-1)!;
  if (parts.length === 2 && (parts[0]!.length === 0 || parts[0]!.length > 253 || !DNS1123_SUBDOMAIN.test(parts[0]!))) return false;
  return name.length > 0 && name.length <= 63 && QUALIFIED_NAME.test(name);
}

/** fieldpath.SplitMaybeSubscriptedPath: `metadata.labels['k']` -> ['metadata.labels', 'k']. */
export function splitSubscript(fieldPath: string): [string, string] | undefined {
  if (!fieldPath.endsWith("']")) return undefined;
  const s = fieldPath.slice(0, -2);
  const at = s.indexOf("['");
  if (at <= 0) return undefined;
  return [s.slice(0, at), s.slice(at + 2)];
}

/** filepath.Clean for a relative path that has no '..' (validation refused those). */
export function cleanPath(p: string): string {
  const parts = p.split('/').filter((c) => c !== '' && c !== '.');
  return parts.length === 0 ? '.' : parts.join('/');
}

function isMode(m: unknown): m is number {
  return Number.isInteger(m) && (m as number) >= 0 && (m as number) <= 0o777;
}

function unknownKeys(o: Record<string, unknown>, known: readonly string[], at: string): string[] {
  return Object.keys(o).filter((k) => !known.includes(k)).map((k) => `${at}: unknown field ${q(k)}`);
}

/** Pod-controlled text in a message (describe.ts): quoted, escaped, cut at 80 characters. */
const q = (s: string): string => describe(s);

/** Problems with one fieldRef (volume items and env share it); [] when valid. */
function checkFieldRef(ref: unknown, at: string, allowed: ReadonlySet<string> = FIELDS): string[] {
  if (!isRecord(ref)) return [`${at}: must be an object`];
  const errs = unknownKeys(ref, ['apiVersion', 'fieldPath'], at);
  if (ref.apiVersion !== undefined && ref.apiVersion !== 'v1') errs.push(`${at}.apiVersion: only "v1" is supported`);
  if (typeof ref.fieldPath !== 'string' || ref.fieldPath === '') return [...errs, `${at}.fieldPath: required`];
  const sub = splitSubscript(ref.fieldPath);
  if (sub) {
    const [p, key] = sub;
    if (p === 'metadata.annotations' ? !isQualifiedName(key.toLowerCase()) : p === 'metadata.labels' ? !isQualifiedName(key) : true) {
      errs.push(p === 'metadata.annotations' || p === 'metadata.labels'
        ? `${at}.fieldPath: ${q(key)} is not a valid key (a qualified name: [prefix/]name)`
        : `${at}.fieldPath: ${q(p)} does not support a subscript`);
    }
  } else if (!allowed.has(ref.fieldPath)) {
    errs.push(`${at}.fieldPath: ${q(ref.fieldPath)} is not supported; use one of ${[...allowed].join(', ')}`);
  }
  return errs;
}

function checkDivisor(resource: string, divisor: unknown, at: string): string[] {
  if (divisor === undefined) return [];
  const quantity = typeof divisor === 'string' || typeof divisor === 'number' ? parseQuantity(String(divisor)) : undefined;
  if (!quantity) return [`${at}.divisor: ${q(String(divisor))} is not a quantity`];
  if (isZero(quantity)) return [];
  const one = { num: 1n, den: 1n };
  if (resource.endsWith('.cpu')) {
    return equal(quantity, one) || equal(quantity, { num: 1n, den: 1000n }) ? [] : [`${at}.divisor: only 1m and 1 are supported with the cpu resource`];
  }
  const binary = /[KMGTPE]i$/.test(String(divisor));
  const ok = equal(quantity, one) || [1, 2, 3, 4, 5, 6].some((k) => equal(quantity, { num: binary ? 1n << BigInt(10 * k) : 10n ** BigInt(3 * k), den: 1n }));
  return ok ? [] : [`${at}.divisor: only 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with ${resource}`];
}

function checkPath(p: unknown, at: string): string[] {
  if (typeof p !== 'string' || p === '') return [`${at}.path: required`];
  if (p.startsWith('/')) return [`${at}.path: must be a relative path`];
  if (p.split('/').includes('..')) return [`${at}.path: must not contain '..'`];
  if (p.startsWith('..')) return [`${at}.path: must not start with '..'`];
  if (p.includes('\0')) return [`${at}.path: must not contain NUL`];
  if (Buffer.byteLength(p) > MAX_PATH || p.split('/').some((c) => Buffer.byteLength(c) > MAX_NAME)) {
    return [`${at}.path: too long (at most ${MAX_PATH} bytes, ${MAX_NAME} per name)`];
  }
  if (cleanPath(p) === '.') return [`${at}.path: names no file`];
  if (cleanPath(p).split('/').length > MAX_DEPTH) return [`${at}.path: nested too deeply (at most ${MAX_DEPTH} names, directories included; the agent walks each directory on its own)`];
  if (p.split('/').some((c) => c.startsWith(RESERVED_NAME_PREFIX))) return [`${at}.path: names starting with ${RESERVED_NAME_PREFIX} are reserved for the agent's temporary files`];
  return [];
}

/**
 * Problems with a downwardAPI source as JSON would give it (strict: unknown fields are
 * errors, since dropping one silently would change what the user asked for). `containers`,
 * when given, are the pod's container and init container names: resourceFieldRef must name one
 * (a set: 128 items against thousands of containers was quadratic, on the webhook's loop).
 */
export function checkSource(src: unknown, at = 'downwardAPI', containers?: ReadonlySet<string>): string[] {
  if (!isRecord(src)) return [`${at}: must be an object`];
  const errs = unknownKeys(src, ['items', 'defaultMode'], at);
  if (src.defaultMode !== undefined && !isMode(src.defaultMode)) errs.push(`${at}.defaultMode: must be a number between 0 and 0777 (octal)`);
  if (src.items === undefined) return errs;
  if (!Array.isArray(src.items)) return [...errs, `${at}.items: must be a list`];
  if (src.items.length > MAX_ITEMS) return [...errs, `${at}.items: at most ${MAX_ITEMS} items`];
  const paths = new Set<string>();
  src.items.forEach((item: unknown, i) => {
    const ia = `${at}.items[${i}]`;
    if (!isRecord(item)) return void errs.push(`${ia}: must be an object`);
    const pathProblems = checkPath(item.path, ia);
    errs.push(...unknownKeys(item, ['path', 'fieldRef', 'resourceFieldRef', 'mode'], ia), ...pathProblems);
    if (item.mode !== undefined && !isMode(item.mode)) errs.push(`${ia}.mode: must be a number between 0 and 0777 (octal)`);
    if ((item.fieldRef === undefined) === (item.resourceFieldRef === undefined)) {
      errs.push(`${ia}: exactly one of fieldRef and resourceFieldRef is required`);
    } else if (item.fieldRef !== undefined) {
      errs.push(...checkFieldRef(item.fieldRef, `${ia}.fieldRef`));
    } else {
      errs.push(...checkResourceRef(item.resourceFieldRef, `${ia}.resourceFieldRef`, containers));
    }
    // Only valid paths: a refused one (over 32 names, say) costs nothing more.
    if (typeof item.path === 'string' && pathProblems.length === 0) paths.add(cleanPath(item.path));
  });
  // At most one conflict per path (128 items): callers show the first few and count the rest.
  errs.push(...fileDirectoryConflicts(paths, at));
  return errs;
}

/**
 * Paths where one item's file is another's directory ("a" and "a/b"), each reported once, at
 * its shallowest such ancestor. Linear in the components: a trie, not every prefix of every path
 * (128 items of 2,000 components each made that quadratic check take seconds, on every watch
 * event of the pod, with the agent's event loop blocked).
 */
function fileDirectoryConflicts(paths: ReadonlySet<string>, at: string): string[] {
  interface Node { file?: string; kids: Map<string, Node> }
  const root: Node = { kids: new Map() };
  for (const p of paths) {
    let n = root;
    for (const c of p.split('/')) {
      let k = n.kids.get(c);
      if (!k) n.kids.set(c, (k = { kids: new Map() }));
      n = k;
    }
    n.file = p;
  }
  const errs: string[] = [];
  for (const p of paths) {
    let n = root;
    const parts = p.split('/');
    for (const c of parts.slice(0, -1)) {
      n = n.kids.get(c)!;
      if (n.file !== undefined) {
        errs.push(`${at}.items: ${q(n.file)} is both a file and the directory of ${q(p)}`);
        break;
      }
    }
  }
  return errs;
}

function checkResourceRef(ref: unknown, at: string, containers: ReadonlySet<string> | undefined): string[] {
  if (!isRecord(ref)) return [`${at}: must be an object`];
  const errs = unknownKeys(ref, ['containerName', 'resource', 'divisor'], at);
  if (typeof ref.containerName !== 'string' || ref.containerName === '') return [...errs, `${at}.containerName: required in a volume`];
  if (containers && !containers.has(ref.containerName)) errs.push(`${at}.containerName: the pod has no container ${q(ref.containerName)}`);
  if (typeof ref.resource !== 'string' || ref.resource === '') return [...errs, `${at}.resource: required`];
  if (!RESOURCES.has(ref.resource) && !HUGEPAGES.some((h) => (ref.resource as string).startsWith(h))) {
    errs.push(`${at}.resource: ${q(ref.resource)} is not supported; use one of ${[...RESOURCES].join(', ')} or limits/requests.hugepages-<size>`);
  }
  return [...errs, ...checkDivisor(ref.resource, ref.divisor, at)];
}

/** A failure the kubelet would also meet at mount time (a container that is not there). */
export class DownwardAPIError extends Error {
  override readonly name = 'DownwardAPIError';
}

/** What the extension fields read: the pod's Node and, on a node that follows owners, its chain. */
export interface ExtensionContext {
  node?: NodeRef | undefined;
  chain?: ControllerChain | undefined;
}

const NOT_FOLLOWED: ControllerChain = { items: [], end: { reason: 'NotFollowed', message: 'this node does not follow owners (node label ownerrefs.dev/follow-owners=true turns it on)' } };

/** The files of a valid source (see checkSource), in item order, the last item winning a repeated path. */
export function renderDownwardAPI(pod: DownwardPod, src: DownwardAPISource, allocatable: ResourceList = {}, ctx: ExtensionContext = {}): ProjectedFile[] {
  const byPath = new Map<string, ProjectedFile>();
  const fields = new Map<string, string>(); // path -> fieldPath
  const defaultMode = src.defaultMode ?? DEFAULT_MODE;
  for (const item of src.items ?? []) {
    const text = item.fieldRef ? fieldValue(pod, item.fieldRef.fieldPath, ctx) : resourceValue(pod, item.resourceFieldRef!, allocatable);
    const path = cleanPath(item.path);
    byPath.delete(path);
    byPath.set(path, { path, bytes: Buffer.from(text, 'utf8'), mode: item.mode ?? defaultMode });
    fields.set(path, item.fieldRef?.fieldPath ?? '');
  }
  return keepUnsettled([...byPath.values()], fields, ctx.chain);
}

/**
 * An unsettled chain's items get the KeepRule the agent's own chain files get (chain.ts):
 * only when a chain item is there to vouch for the workload items, and all of them sit in
 * one directory (the writer weighs a group within one directory).
 */
function keepUnsettled(files: ProjectedFile[], fields: ReadonlyMap<string, string>, chain: ControllerChain | undefined): ProjectedFile[] {
  const firstChain = files.find((f) => fields.get(f.path) === EXTENSION_FIELDS.chain);
  const keep = chain && firstChain && keepWhileUnsettled(chain, firstChain.path);
  // A second chain item must be the same bytes as the first: they are kept together only if they agree.
  const sameAsFirst: KeepRule | undefined = keep && firstChain && { ...keep.chain, matches: { of: firstChain.path, derive: (b) => b } };
  const ruleOf = (f: ProjectedFile) => fields.get(f.path) === EXTENSION_FIELDS.chain ? (f === firstChain ? keep?.chain : sameAsFirst)
    : fields.get(f.path) === EXTENSION_FIELDS.workload ? keep?.workload : undefined;
  const ruled = files.filter((f) => ruleOf(f) !== undefined);
  const dirs = new Set(ruled.map((f) => f.path.slice(0, Math.max(0, f.path.lastIndexOf('/')))));
  if (!keep || dirs.size !== 1) return files; // `keep` needs a chain item: it vouches for the workload items
  return files.map((f) => (ruleOf(f) ? { ...f, keep: ruleOf(f) } : f));
}

function fieldValue(pod: DownwardPod, fieldPath: string, ctx: ExtensionContext): string {
  const m = pod.metadata ?? {};
  const sub = splitSubscript(fieldPath);
  if (sub) return (sub[0] === 'metadata.labels' ? m.labels : m.annotations)?.[sub[1]] ?? '';
  switch (fieldPath) {
    case 'metadata.name': return m.name ?? '';
    case 'metadata.namespace': return m.namespace ?? '';
    case 'metadata.uid': return m.uid ?? '';
    case 'metadata.labels': return formatMap(m.labels);
    case 'metadata.annotations': return formatMap(m.annotations);
    case OWNER_REFERENCES_FIELD: return renderOwnerReferencesJson(m.ownerReferences ?? []);
    case EXTENSION_FIELDS.chain: return renderChainJson(ctx.chain ?? NOT_FOLLOWED);
    case EXTENSION_FIELDS.workload: return renderWorkloadJson(ctx.chain ?? NOT_FOLLOWED);
    case EXTENSION_FIELDS.node: return ctx.node ? renderNodeOwnerJson(ctx.node) : '[]';
    default: throw new DownwardAPIError(`unsupported fieldPath ${JSON.stringify(fieldPath)}`);
  }
}

function quantityOf(list: ResourceList | null | undefined, name: string): Rational | undefined {
  const v = list?.[name];
  return v === undefined ? undefined : parseQuantity(String(v));
}

function resourceValue(pod: DownwardPod, ref: ResourceFieldRef, allocatable: ResourceList): string {
  const c = [...pod.spec?.containers ?? [], ...pod.spec?.initContainers ?? []].find((x) => x.name === ref.containerName);
  if (!c) throw new DownwardAPIError(`container ${JSON.stringify(ref.containerName ?? '')} not found`);
  const d = ref.divisor === undefined ? undefined : parseQuantity(String(ref.divisor));
  const divisor = d && !isZero(d) ? d : { num: 1n, den: 1n };
  const [kind, name] = [ref.resource.slice(0, ref.resource.indexOf('.')), ref.resource.slice(ref.resource.indexOf('.') + 1)];
  let q = quantityOf(kind === 'limits' ? c.resources?.limits : c.resources?.requests, name);
  // MergeContainerResourceLimits: a missing or zero limit of cpu, memory or ephemeral
  // storage is the node's allocatable (hugepages are never overcommitted, so not them).
  if (kind === 'limits' && ['cpu', 'memory', 'ephemeral-storage'].includes(name) && (!q || isZero(q))) q = quantityOf(allocatable, name) ?? q;
  const amount = q ?? { num: 0n, den: 1n };
  return name === 'cpu' ? goCeilRatio(milliValue(amount), milliValue(divisor)) : goCeilRatio(value(amount), value(divisor));
}
