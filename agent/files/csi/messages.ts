// The gRPC boundary of CSI mode, typed: the messages the driver reads and writes and the
// handlers each service must have. Written once from ./proto; test/agent/files/csi/messages.test.ts
// holds them against types generated from the same .proto files (as the loader decodes:
// camelCase fields, defaults filled in, 64-bit integers and enums as strings), so a
// field that is renamed, retyped or misspelt on either side fails the tests.
//
// Requests are the decoded shape, and list only the fields the driver reads; responses
// list only what it may send.

/** A request the driver reads nothing of. */
type NothingRead = Record<never, never>;
/** A response with no fields: anything else in it is a type error. */
type NothingSent = Record<string, never>;

// --- Identity ---
export type GetPluginInfoRequest = NothingRead;
export interface GetPluginInfoResponse { name: string; vendorVersion: string }
export type GetPluginCapabilitiesRequest = NothingRead;
export interface GetPluginCapabilitiesResponse { capabilities: never[] }
export type ProbeRequest = NothingRead;
export interface ProbeResponse { ready: { value: boolean } }

// --- Node ---
export interface NodePublishVolumeRequest {
  volumeId: string;
  targetPath: string;
  volumeCapability: { block?: object | null; mount?: object | null } | null;
  readonly: boolean;
  volumeContext: Record<string, string>;
}
export type NodePublishVolumeResponse = NothingSent;
export interface NodeUnpublishVolumeRequest { volumeId: string; targetPath: string }
export type NodeUnpublishVolumeResponse = NothingSent;
export type NodeGetCapabilitiesRequest = NothingRead;
export interface NodeGetCapabilitiesResponse { capabilities: never[] }
export type NodeGetInfoRequest = NothingRead;
export interface NodeGetInfoResponse { nodeId: string; maxVolumesPerNode: number }

// --- Plugin registration (the kubelet's plugin watcher) ---
export type InfoRequest = NothingRead;
export interface PluginInfo { type: string; name: string; endpoint: string; supportedVersions: string[] }
export interface RegistrationStatus { pluginRegistered: boolean; error: string }
export type RegistrationStatusResponse = NothingSent;

type Answer<T> = T | Promise<T>;

export interface IdentityHandlers {
  GetPluginInfo(req: GetPluginInfoRequest): Answer<GetPluginInfoResponse>;
  GetPluginCapabilities(req: GetPluginCapabilitiesRequest): Answer<GetPluginCapabilitiesResponse>;
  Probe(req: ProbeRequest): Answer<ProbeResponse>;
}

export interface NodeHandlers {
  NodePublishVolume(req: NodePublishVolumeRequest): Answer<NodePublishVolumeResponse>;
  NodeUnpublishVolume(req: NodeUnpublishVolumeRequest): Answer<NodeUnpublishVolumeResponse>;
  NodeGetCapabilities(req: NodeGetCapabilitiesRequest): Answer<NodeGetCapabilitiesResponse>;
  NodeGetInfo(req: NodeGetInfoRequest): Answer<NodeGetInfoResponse>;
}

export interface RegistrationHandlers {
  GetInfo(req: InfoRequest): Answer<PluginInfo>;
  NotifyRegistrationStatus(req: RegistrationStatus): Answer<RegistrationStatusResponse>;
}
