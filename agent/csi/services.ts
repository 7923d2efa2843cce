// The gRPC services CSI mode serves, as grpc-js service definitions: each rpc's path and
// how its messages are encoded and decoded. The codec is static code generated from ./proto
// (scripts/gen-csi-codec.ts), so the agent loads neither a .proto parser nor reflection.
// test/agent/csi/services.test.ts holds this table against the .proto files' services.

import type * as grpc from '@grpc/grpc-js';
import * as codec from './proto/codec.js';
import type { MessageType } from './proto/codec.js';

export interface Services {
  identity: grpc.ServiceDefinition;
  node: grpc.ServiceDefinition;
  registration: grpc.ServiceDefinition;
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
  const service = ([name, pkg, rpcs]: (typeof RPCS)[keyof Services]): grpc.ServiceDefinition => {
    const def: Record<string, grpc.MethodDefinition<object, object>> = {};
    for (const [rpc, [req, res]] of Object.entries(rpcs)) {
      const request = message(pkg, req);
      const response = message(pkg, res);
      def[rpc] = {
        path: `/${name}/${rpc}`,
        requestStream: false,
        responseStream: false,
        requestSerialize: serializer(request),
        requestDeserialize: deserializer(request),
        responseSerialize: serializer(response),
        responseDeserialize: deserializer(response),
        originalName: rpc[0]!.toLowerCase() + rpc.slice(1),
      };
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

const deserializer = (t: MessageType) => (bytes: Buffer): Record<string, unknown> => t.toObject(t.decode(bytes), DECODE);
