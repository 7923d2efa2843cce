// Handwritten, beside the file it types (TypeScript reads it there): the part of the generated codec.js (scripts/gen-csi-codec.ts) that agent/files/csi/services.ts
// uses: each message type's four functions, by package and name. Message shapes are typed
// in agent/files/csi/messages.ts, checked against the .proto by test/agent/files/csi/messages.test.ts.

export interface ConversionOptions {
  longs?: StringConstructor | NumberConstructor;
  enums?: StringConstructor;
  defaults?: boolean;
  oneofs?: boolean;
}

export interface MessageType {
  fromObject(object: object): object;
  toObject(message: object, options?: ConversionOptions): Record<string, unknown>;
  encode(message: object): { finish(): Uint8Array };
  decode(bytes: Uint8Array | import('protobufjs').Reader): object;
}

export declare const csi: { v1: Record<string, MessageType | undefined> };
export declare const pluginregistration: Record<string, MessageType | undefined>;
