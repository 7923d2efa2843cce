// The gRPC services CSI mode serves: each rpc's path and how its messages are encoded and
// decoded (server.ts serves them, unary, as every rpc of these services is). The codec is
// static code generated from ./proto (scripts/gen-csi-codec.ts), so the agent loads
// neither a .proto parser nor reflection.
// test/agent/files/csi/services.test.ts holds this table against the .proto files' services.

import protobuf from 'protobufjs/minimal.js';
import * as codec from './generated/codec.js';
import type { MessageType } from './generated/codec.js';

/** One unary rpc: where it is served, its request decoded, its response encoded. */
export interface Rpc {
  /** /<package.Service>/<Method>, as gRPC puts it in :path. */
  path: string;
  decode(request: Buffer): Record<string, unknown>;
  encode(response: object): Buffer;
}

/** A service's rpcs by method name. */
export type ServiceDefinition = Record<string, Rpc>;

export interface Services {
  identity: ServiceDefinition;
  node: ServiceDefinition;
  registration: ServiceDefinition;
}

/**
 * What the handlers receive: camelCase field names, enums and 64-bit integers as strings,
 * defaults filled in, the set oneof's name as a field (as @grpc/proto-loader decodes with
 * the options messages.ts is checked under).
 */
const DECODE = { longs: String, enums: String, defaults: true, oneofs: true } as const;

/** rpc name → [request message, response message], per service, as in the .proto files. */
const RPCS = {
  identity: ['csi.v1.Identity', codec.csi.v1, {
    GetPluginInfo: ['GetPluginInfoRequest', 'GetPluginInfoResponse'],
    GetPluginCapabilities: ['GetPluginCapabilitiesRequest', 'GetPluginCapabilitiesResponse'],
    Probe: ['ProbeRequest', 'ProbeResponse'],
  }],
  node: ['csi.v1.Node', codec.csi.v1, {
    NodePublishVolume: ['NodePublishVolumeRequest', 'NodePublishVolumeResponse'],
    NodeUnpublishVolume: ['NodeUnpublishVolumeRequest', 'NodeUnpublishVolumeResponse'],
    NodeGetCapabilities: ['NodeGetCapabilitiesRequest', 'NodeGetCapabilitiesResponse'],
    NodeGetInfo: ['NodeGetInfoRequest', 'NodeGetInfoResponse'],
  }],
  registration: ['pluginregistration.Registration', codec.pluginregistration, {
    GetInfo: ['InfoRequest', 'PluginInfo'],
    NotifyRegistrationStatus: ['RegistrationStatus', 'RegistrationStatusResponse'],
  }],
} as const satisfies Record<keyof Services, readonly [string, Record<string, MessageType | undefined>, Record<string, readonly [string, string]>]>;

export function loadServices(): Services {
  const service = ([name, pkg, rpcs]: (typeof RPCS)[keyof Services]): ServiceDefinition => {
    const def: ServiceDefinition = {};
    for (const [rpc, [req, res]] of Object.entries(rpcs)) {
      def[rpc] = { path: `/${name}/${rpc}`, decode: deserializer(message(pkg, req)), encode: serializer(message(pkg, res)) };
    }
    return def;
  };
  return { identity: service(RPCS.identity), node: service(RPCS.node), registration: service(RPCS.registration) };
}

function message(pkg: Record<string, MessageType | undefined>, name: string): MessageType {
  const t = pkg[name];
  // A message the table names but codec.js lacks: regenerate it (npm run gen:csi).
  if (!t) throw new Error(`CSI codec has no message ${name}`);
  return t;
}

const serializer = (t: MessageType) => (value: object): Buffer => {
  const bytes = t.encode(t.fromObject(value)).finish();
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
};

const deserializer = (t: MessageType) => (bytes: Buffer): Record<string, unknown> => t.toObject(t.decode(strictReader(bytes)), DECODE);

/**
 * A reader that refuses a string running past the end of its message, as protobuf-go does
 * (protobufjs's reader for Buffers cuts it short instead: a truncated unpublish would still
 * remove files). Strings decode as Buffer's do: each invalid byte is U+FFFD.
 */
function strictReader(bytes: Buffer): protobuf.Reader {
  const r = protobuf.Reader.create(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)); // not a Buffer: the bounds-checked reader
  r.string = function string(this: protobuf.Reader) {
    const b = this.bytes();
    return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('utf8');
  };
  return r;
}
