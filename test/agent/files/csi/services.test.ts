// The agent's CSI services (agent/files/csi/services.ts, over the static codec generated into
// agent/files/csi/generated/codec.js) against the .proto files as @grpc/proto-loader reads them: the
// same rpcs at the same paths, the same bytes on the wire, the same decoded objects.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import type * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { loadServices, type Services } from '../../../../agent/files/csi/services.ts';
import { CODEC, generate } from '../../../../scripts/gen-csi-codec.ts';
import { protoServices } from '../../../support/csi.ts';

const ours = loadServices();
const theirs = protoServices();

/** For each rpc: a request and a response with every field the .proto declares set. */
const SAMPLES: Record<keyof Services, Record<string, [object, object]>> = {
  identity: {
    GetPluginInfo: [{}, { name: 'ownerrefs.dev', vendorVersion: '0.1.0', manifest: { commit: 'abc' } }],
    GetPluginCapabilities: [{}, { capabilities: [{ service: { type: 'CONTROLLER_SERVICE' } }] }],
    Probe: [{}, { ready: { value: true } }],
  },
  node: {
    NodePublishVolume: [{
      volumeId: 'csi-0123', publishContext: { a: 'b' }, stagingTargetPath: '/staging', targetPath: '/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/podinfo/mount',
      volumeCapability: { mount: { fsType: 'ext4', mountFlags: ['ro', 'noexec'], volumeMountGroup: '2000' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } },
      readonly: true, volumeContext: { 'csi.storage.k8s.io/pod.name': 'web-0', 'csi.storage.k8s.io/ephemeral': 'true' },
    }, {}],
    NodeUnpublishVolume: [{ volumeId: 'csi-0123', targetPath: '/t' }, {}],
    NodeGetCapabilities: [{}, { capabilities: [{ rpc: { type: 'VOLUME_MOUNT_GROUP' } }, { rpc: { type: 'UNKNOWN' } }] }],
    NodeGetInfo: [{}, { nodeId: 'node-a', maxVolumesPerNode: '9007199254740993', accessibleTopology: { segments: { zone: 'a' } } }],
  },
  registration: {
    GetInfo: [{}, { type: 'CSIPlugin', name: 'ownerrefs.dev', endpoint: '/csi.sock', supportedVersions: ['1.0.0', '1.2.0'] }],
    NotifyRegistrationStatus: [{ pluginRegistered: false, error: 'refused' }, {}],
  },
};

const services = Object.keys(SAMPLES) as (keyof Services)[];
const rpcs = services.flatMap((s) => Object.keys(SAMPLES[s]).map((rpc) => [s, rpc] as const));
const ourRpc = (s: keyof Services, rpc: string) => {
  const m = ours[s][rpc];
  if (!m) throw new Error(`${s} has no ${rpc}`);
  return m;
};
const theirRpc = (s: keyof Services, rpc: string) => theirs[s][rpc] as grpc.MethodDefinition<object, object>;

describe('CSI services', () => {
  it('codec.js is what pbjs generates from the .proto files today (npm run gen:csi)', () => {
    expect(readFileSync(CODEC, 'utf8')).toBe(generate());
  });

  // The test runner's module interop forgives an import Node's own ESM loader refuses.
  it('codec.js loads and decodes under Node itself, as the compiled agent runs it', () => {
    const code = `const { pluginregistration: p } = await import(${JSON.stringify(pathToFileURL(CODEC).href)});
      console.log(JSON.stringify(p.RegistrationStatus.toObject(p.RegistrationStatus.decode(Buffer.from([8, 1, 18, 1, 97])))));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({ pluginRegistered: true, error: 'a' });
  });

  // The server (agent/files/csi/grpc.ts) speaks unary calls only: every rpc of these services must be one.
  it.each(services)('%s serves the .proto\'s rpcs at their paths, all unary', (s) => {
    const paths = (def: Record<string, { path: string }>) => Object.entries(def).map(([rpc, m]) => [rpc, m.path]).sort();
    expect(paths(ours[s])).toEqual(paths(theirs[s]));
    expect(Object.values(theirs[s]).every((m) => !m.requestStream && !m.responseStream)).toBe(true);
    expect(Object.keys(ours[s]).sort()).toEqual(Object.keys(SAMPLES[s]).sort());
  });

  // Bytes may differ: proto-loader's encoder writes a field set to its zero value, the
  // static code leaves it out, as proto3 (and the Go CSI code) does. Both decode the same.
  it.each(rpcs)('%s %s: the agent decodes requests and encodes responses as the .proto files say', (s, rpc) => {
    const [request, response] = SAMPLES[s][rpc]!;
    const a = ourRpc(s, rpc);
    const b = theirRpc(s, rpc);
    const sent = b.requestSerialize(request);
    expect(a.decode(sent)).toEqual(b.requestDeserialize(sent));
    const mine = a.encode(response);
    expect(Buffer.isBuffer(mine)).toBe(true);
    expect(b.responseDeserialize(mine)).toEqual(b.responseDeserialize(b.responseSerialize(response)));
    // Defaults filled in on an empty message, as the handlers expect.
    expect(a.decode(Buffer.alloc(0))).toEqual(b.requestDeserialize(Buffer.alloc(0)));
  });

  it('skips fields the .proto leaves out (a newer kubelet, the secrets field) when decoding', () => {
    const known = theirRpc('node', 'NodePublishVolume').requestSerialize({ volumeId: 'v', targetPath: '/t' });
    // Field 7 (secrets, a map entry) and field 99 (varint), neither declared.
    const unknown = Buffer.from([0x3a, 0x06, 0x0a, 0x01, 0x6b, 0x12, 0x01, 0x76, 0x98, 0x06, 0x01]);
    const m = ourRpc('node', 'NodePublishVolume');
    expect(m.decode(Buffer.concat([known, unknown]))).toEqual(m.decode(known));
  });

  const TARGET = Buffer.from('/var/lib/kubelet/pods/11111111-2222-4333-8444-555555555555/volumes/kubernetes.io~csi/podinfo/mount');
  it.each<[string, Buffer]>([
    ['a string longer than the message holds (truncated)', Buffer.concat([Buffer.from([0x0a, 0x01, 0x76, 0x12, 0xff, 0x01]), TARGET])],
    ['a map entry whose string runs past the entry', Buffer.from([0x0a, 0x01, 0x76, 0x32, 0x04, 0x0a, 0x01, 0x6b, 0x12, 0x09, 0x76])],
  ])('refuses %s, as protobuf-go does, rather than act on what was cut', (_what, bytes) => {
    const rpc = _what.startsWith('a map') ? 'NodePublishVolume' : 'NodeUnpublishVolume';
    expect(() => ourRpc('node', rpc).decode(bytes)).toThrow(/index out of range/);
  });

  it('decodes bytes that are not UTF-8 as one U+FFFD each, as Buffer does', () => {
    const bytes = Buffer.concat([Buffer.from([0x0a, 0x03, 0x61, 0xff, 0x62])]);
    expect(ourRpc('node', 'NodeUnpublishVolume').decode(bytes)).toMatchObject({ volumeId: 'a\ufffdb' });
  });
});
