// CSI test helpers: a gRPC client for the agent's sockets, and the kubelet's side of a
// publish (its directories, vol_data.json, and the request it sends). The request
// shape follows the kubelet's csiMountMgr.SetUpAt / csiDriverClient.NodePublishVolume:
// readonly from the csi volume source, a mount capability with an access mode, the
// pod-info keys in the volume context, and target <pod>/volumes/kubernetes.io~csi/<vol>/mount.
//
// This client decodes with @grpc/proto-loader from agent/files/csi/proto's .proto files, apart
// from the agent's generated codec, so a codec that drifted from them fails here; a wrong
// field number in the .proto files themselves is caught by localcluster/csi/kubeletcsi
// (Go, the spec's generated code) and csi-sanity.

import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { afterEach } from 'vitest';

export const DRIVER = 'ownerrefs.dev';

export interface CallResult<T = Record<string, unknown>> {
  code: number;
  details: string;
  res?: T;
}

export interface CsiClient {
  call<T = Record<string, unknown>>(service: 'identity' | 'node' | 'registration', method: string, req?: object): Promise<CallResult<T>>;
  close(): void;
}

const clients: CsiClient[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

const PROTO_DIR = path.join(import.meta.dirname, '..', '..', 'agent', 'files', 'csi', 'proto');

/** The .proto files' services, decoded as the agent's handlers receive them (agent/files/csi/services.ts). */
export function protoServices(): Record<'identity' | 'node' | 'registration', grpc.ServiceDefinition> {
  const opts: protoLoader.Options = { keepCase: false, longs: String, enums: String, defaults: true, oneofs: true };
  const load = (file: string) => grpc.loadPackageDefinition(protoLoader.loadSync(path.join(PROTO_DIR, file), opts));
  const csi = load('csi.proto');
  const reg = load('pluginregistration.proto');
  const v1 = (csi.csi as grpc.GrpcObject).v1 as grpc.GrpcObject;
  const service = (o: grpc.GrpcObject, name: string) => (o[name] as grpc.ServiceClientConstructor).service;
  return {
    identity: service(v1, 'Identity'),
    node: service(v1, 'Node'),
    registration: service(reg.pluginregistration as grpc.GrpcObject, 'Registration'),
  };
}

export function csiClient(socket: string): CsiClient {
  const defs = protoServices();
  const made = new Map<string, grpc.Client>();
  const clientFor = (service: keyof typeof defs) => {
    let c = made.get(service);
    if (!c) {
      const Ctor = grpc.makeGenericClientConstructor(defs[service], service);
      c = new Ctor(`unix:${socket}`, grpc.credentials.createInsecure());
      made.set(service, c);
    }
    return c as grpc.Client & Record<string, (req: object, cb: (err: grpc.ServiceError | null, res: unknown) => void) => void>;
  };
  const client: CsiClient = {
    call: (service, method, req = {}) => new Promise((resolve) => {
      const c = clientFor(service);
      const fn = c[method];
      if (!fn) throw new Error(`no method ${method} on ${service}`);
      fn.call(c, req, (err, res) => resolve(err ? { code: err.code, details: err.details } : { code: 0, details: '', res: res as never }));
    }),
    close: () => { for (const c of made.values()) c.close(); },
  };
  clients.push(client);
  return client;
}

/** The kubelet's volume handle for an inline volume: "csi-" + sha256(podUID + volume name). */
export function volumeHandle(podUID: string, volume: string): string {
  return `csi-${createHash('sha256').update(podUID + volume).digest('hex')}`;
}

export interface PodRef {
  name: string;
  namespace: string;
  uid: string;
  serviceAccount?: string;
}

export function podInfo(pod: PodRef): Record<string, string> {
  return {
    'csi.storage.k8s.io/pod.name': pod.name,
    'csi.storage.k8s.io/pod.namespace': pod.namespace,
    'csi.storage.k8s.io/pod.uid': pod.uid,
    'csi.storage.k8s.io/serviceAccount.name': pod.serviceAccount ?? 'default',
    'csi.storage.k8s.io/ephemeral': 'true',
  };
}

export function targetPath(kubeletRoot: string, podUID: string, volume = 'podinfo'): string {
  return path.join(kubeletRoot, 'pods', podUID, 'volumes', 'kubernetes.io~csi', volume, 'mount');
}

/**
 * What the kubelet does before NodePublishVolume: makes the volume's directory (0750)
 * and writes vol_data.json beside the target; returns the request it then sends.
 */
export function kubeletPrepare(kubeletRoot: string, pod: PodRef, volume = 'podinfo', nodeName = 'node-a') {
  const target = targetPath(kubeletRoot, pod.uid, volume);
  const handle = volumeHandle(pod.uid, volume);
  mkdirSync(path.dirname(target), { recursive: true, mode: 0o750 });
  writeFileSync(path.join(path.dirname(target), 'vol_data.json'), JSON.stringify({
    specVolID: volume, volumeHandle: handle, driverName: DRIVER, nodeName, volumeLifecycleMode: 'Ephemeral',
    attachmentID: `csi-${createHash('sha256').update(handle + DRIVER + nodeName).digest('hex')}`,
  }) + '\n');
  return {
    volumeId: handle,
    targetPath: target,
    readonly: true,
    volumeCapability: { mount: { fsType: '', mountFlags: [] }, accessMode: { mode: 'SINGLE_NODE_WRITER' } },
    volumeContext: podInfo(pod),
    publishContext: {},
  };
}
