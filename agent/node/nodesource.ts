// The agent's own Node carries its configuration as labels. Invalid values get a
// Warning Event on the Node and keep the last good setting. A deleted Node changes
// nothing (no remove handler): the last settings stay while the agent is drained.

import type { Logger } from 'pino';
import { REASON_INVALID_NODE_LABEL, type EventSink } from '../kube/events.ts';
import type { ReflectorHandler } from '../kube/reflectorcontract.ts';
import { F } from '../monitoring/logfields.ts';
import { sameSettings, settingsFromLabels, type NodeSettings } from './nodeconfig.ts';

export interface NodeView {
  metadata?: { name?: string; uid?: string; labels?: Record<string, string> | null } | undefined;
  /** Read by downwardAPI items for limits a container does not set. */
  status?: { allocatable?: Record<string, string> | null } | undefined;
}

export class NodeConfigSource implements ReflectorHandler<NodeView> {
  readonly #apply: (s: NodeSettings) => void;
  readonly #current: () => NodeSettings;
  readonly #events: EventSink;
  readonly #log: Logger;
  readonly #allocatable: ((a: Record<string, string>) => void) | undefined;
  readonly #node: ((n: { name: string; uid: string }) => void) | undefined;
  /** Bad label=value pairs already reported, each once while it stays: a relist or another label's edit does not repeat them. */
  #reported = new Set<string>();
  #configured = false;
  #markConfigured!: () => void;
  /** Resolves once the Node has been read (or found absent). */
  readonly whenConfigured = new Promise<void>((r) => (this.#markConfigured = r));

  constructor(opts: { current: () => NodeSettings; apply: (s: NodeSettings) => void; events: EventSink; log: Logger; allocatable?: (a: Record<string, string>) => void;
    node?: (n: { name: string; uid: string }) => void }) {
    this.#apply = opts.apply;
    this.#node = opts.node;
    this.#allocatable = opts.allocatable;
    this.#current = opts.current;
    this.#events = opts.events;
    this.#log = opts.log;
  }

  /** True once the Node has been read (or found absent: defaults apply). */
  get configured(): boolean {
    return this.#configured;
  }

  replace(items: NodeView[]): void {
    const node = items[0];
    if (node) this.upsert(node);
    this.#configured = true;
    this.#markConfigured();
  }

  upsert(node: NodeView): void {
    const { settings, invalid } = settingsFromLabels(node.metadata?.labels, this.#current());
    // Each bad label=value said once: fixing one of two does not say the other again.
    const now = new Set(invalid.map((i) => `${i.label}=${i.value}`));
    for (const i of invalid) {
      if (this.#reported.has(`${i.label}=${i.value}`)) continue;
      this.#log.warn({ [F.label]: i.label, [F.value]: i.value, [F.reason]: 'InvalidNodeLabel' }, i.message);
      this.#events.warn({ kind: 'Node', name: node.metadata?.name ?? '', uid: node.metadata?.uid }, REASON_INVALID_NODE_LABEL, i.message);
    }
    this.#reported = now;
    // Settings first: a Node recreated with new labels renders every pod once, not twice.
    if (!sameSettings(settings, this.#current())) {
      this.#log.info({ settings }, 'node settings changed');
      this.#apply(settings);
    }
    this.#allocatable?.(node.status?.allocatable ?? {});
    if (node.metadata?.name && node.metadata.uid) this.#node?.({ name: node.metadata.name, uid: node.metadata.uid });
    this.#configured = true;
    this.#markConfigured();
  }
}
