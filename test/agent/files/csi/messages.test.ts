// The hand-written CSI message and handler types (agent/files/csi/messages.ts) against types
// generated from the same .proto files by @grpc/proto-loader's own generator, with the
// options the server decodes with. The check is the TypeScript compiler's: for every rpc
// of every service, the request type the generator says the server receives must fit what
// the handler declares it reads, and the response the handler declares must fit what the
// generator says may be sent, with no field name the proto does not have.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = path.join(import.meta.dirname, '..', '..', '..', '..');
const PROTO = path.join(ROOT, 'agent', 'files', 'csi', 'proto');
const BIN = path.join(ROOT, 'node_modules', '.bin');
// Inside the checkout, so the generated files resolve @grpc/proto-loader from node_modules.
mkdirSync(path.join(ROOT, 'node_modules', '.cache'), { recursive: true });
const work = mkdtempSync(path.join(ROOT, 'node_modules', '.cache', 'csi-types-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

let generated: Promise<void> | undefined;
const ensureGenerated = () => (generated ??= generate());

/** Generates the proto's types into `work`, with extensions on relative imports (nodenext). */
async function generate(): Promise<void> {
  await run(path.join(BIN, 'proto-loader-gen-types'), ['--longs=String', '--enums=String', '--defaults', '--oneofs',
    '-I', PROTO, '-O', path.join(work, 'gen'), 'csi.proto', 'pluginregistration.proto']);
  const walk = (dir: string): string[] => readdirSync(dir).flatMap((n) => {
    const p = path.join(dir, n);
    return statSync(p).isDirectory() ? walk(p) : [p];
  });
  for (const f of walk(path.join(work, 'gen'))) {
    writeFileSync(f, readFileSync(f, 'utf8').replace(/from '(\.{1,2}\/[^']+)'/g, "from '$1.ts'"));
  }
}

const CHECK = (messages: string) => `
import type * as Ours from ${JSON.stringify(messages)};
import type { IdentityDefinition } from './gen/csi/v1/Identity.ts';
import type { NodeDefinition } from './gen/csi/v1/Node.ts';
import type { RegistrationDefinition } from './gen/pluginregistration/Registration.ts';

// Named keys only: Record<string, never> (an empty response) has none.
type Keys<T> = string extends keyof T ? never : keyof T;
type NoUnknownFields<Declared, Gen> = [Exclude<Keys<Declared>, keyof Gen>] extends [never] ? true : false;
type Reads<Declared, Decoded> = [Decoded] extends [Declared] ? NoUnknownFields<Declared, Decoded> : false;
type Sends<Declared, Allowed> = [Declared] extends [Allowed] ? NoUnknownFields<Declared, Allowed> : false;
type SameKeys<A, B> = [Exclude<keyof A, keyof B> | Exclude<keyof B, keyof A>] extends [never] ? true : false;
// What the server decodes for an rpc, and what it may encode back.
type Decoded<M> = M extends { requestDeserialize: (bytes: Buffer) => infer T } ? T : never;
type Encodable<M> = M extends { responseSerialize: (value: infer T) => Buffer } ? T : never;
type Rpc<H, M> = H extends (req: infer Q) => infer R
  ? [Reads<Q, Decoded<M>>, Sends<Awaited<R>, Encodable<M>>] extends [true, true] ? true : { reads: Reads<Q, Decoded<M>>; sends: Sends<Awaited<R>, Encodable<M>> }
  : { notAFunction: true };
// true when every rpc checks out; otherwise the failing rpcs' verdicts, to which \`true\` cannot be assigned.
type AllTrue<T> = [T] extends [true] ? true : Exclude<T, true>;
type Service<H, Def> = SameKeys<H, Def> extends true
  ? AllTrue<{ [K in keyof Def & keyof H]: Rpc<H[K], Def[K]> }[keyof Def & keyof H]>
  : { methods: 'differ' };

export const identity: Service<Ours.IdentityHandlers, IdentityDefinition> = true;
export const node: Service<Ours.NodeHandlers, NodeDefinition> = true;
export const registration: Service<Ours.RegistrationHandlers, RegistrationDefinition> = true;
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'es2024', lib: ['es2024'], module: 'nodenext', moduleResolution: 'nodenext', types: ['node'], strict: true,
    noEmit: true, skipLibCheck: true, allowImportingTsExtensions: true, verbatimModuleSyntax: true, noUnusedLocals: false,
  },
  files: ['check.ts'],
};

/** Type-checks messages file `messages` against the generated types; the compiler's complaints, or ''. */
async function check(messages: string): Promise<string> {
  await ensureGenerated();
  writeFileSync(path.join(work, 'check.ts'), CHECK(messages));
  writeFileSync(path.join(work, 'tsconfig.json'), JSON.stringify(TSCONFIG));
  try {
    await run(path.join(BIN, 'tsc'), ['-p', work]);
    return '';
  } catch (err) {
    return String((err as { stdout?: string }).stdout ?? err);
  }
}

describe('CSI message types', () => {
  const ours = path.join(ROOT, 'agent', 'files', 'csi', 'messages.ts');

  it('agree with the types generated from the .proto files, rpc by rpc', async () => {
    expect(await check(ours)).toBe('');
  }, 120_000);

  // The check can fail: each mistake below is one a hand-written type could make.
  it.each([
    { what: 'a misspelt response field', from: 'nodeId: string; maxVolumesPerNode: number', to: 'nodeId: string; maxVolumes: number' },
    { what: 'a request field the proto lacks', from: 'volumeId: string; targetPath: string }', to: 'volumeId: string; targetPath: string; stagingPath: string }' },
    { what: 'a retyped request field', from: 'readonly: boolean;', to: 'readonly: string;' },
    { what: 'a handler the service does not have', from: '  Probe(req: ProbeRequest): Answer<ProbeResponse>;', to: '  Probe(req: ProbeRequest): Answer<ProbeResponse>;\n  Ping(req: ProbeRequest): Answer<ProbeResponse>;' },
    { what: 'an empty response given a field', from: 'export type NodePublishVolumeResponse = NothingSent;', to: 'export type NodePublishVolumeResponse = { published: boolean };' },
  ])('fails on $what', async ({ from, to }) => {
    const text = readFileSync(ours, 'utf8');
    expect(text).toContain(from);
    const broken = path.join(work, 'broken-messages.ts');
    writeFileSync(broken, text.replace(from, to));
    expect(await check(broken)).toMatch(/error TS/);
  }, 120_000);
});
