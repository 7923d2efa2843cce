import { describe, expect, it } from 'vitest';
import { decodeUtf8, InputError, parsePod } from '../../../../agent/cli/input/podinput.ts';

const R = '\ufffd';

describe('decodeUtf8 (Go: one U+FFFD per byte that is not part of a valid sequence)', () => {
  it.each([
    { what: 'ASCII and valid multi-byte text', bytes: [0x61, 0xc3, 0xa9, 0xe6, 0x97, 0xa5, 0xf0, 0x9f, 0x8e, 0x89], want: 'aé日🎉' },
    { what: 'a truncated 3-byte sequence (WHATWG: one U+FFFD)', bytes: [0xe2, 0x82], want: R + R },
    { what: 'a truncated 4-byte sequence before ASCII', bytes: [0xf0, 0x9f, 0x8e, 0x41], want: R + R + R + 'A' },
    { what: 'a stray continuation byte', bytes: [0x80], want: R },
    { what: 'an overlong encoding of NUL', bytes: [0xc0, 0x80], want: R + R },
    { what: 'an encoded surrogate', bytes: [0xed, 0xa0, 0x80], want: R + R + R },
    { what: 'a code point above U+10FFFF', bytes: [0xf4, 0x90, 0x80, 0x80], want: R + R + R + R },
    { what: 'bytes that never start a sequence', bytes: [0xff, 0xfe], want: R + R },
    { what: 'a bad continuation, then ASCII', bytes: [0xe2, 0x28, 0xa1], want: R + '(' + R },
  ])('$what', ({ bytes, want }) => {
    expect(decodeUtf8(Uint8Array.from(bytes))).toBe(want);
  });
});

describe('parsePod refuses what the API server\'s decoder would, naming the field', () => {
  const parse = (text: string) => () => parsePod(Buffer.from(text));
  it.each([
    { what: 'controller as a string', text: 'kind: Pod\nmetadata:\n  ownerReferences:\n  - {name: a, controller: "true"}\n', message: 'metadata.ownerReferences[0].controller: a string ("true"), where Kubernetes expects a boolean' },
    { what: 'metadata as a string', text: 'kind: Pod\nmetadata: pod-1\n', message: 'metadata: a string ("pod-1"), where Kubernetes expects an object' },
    { what: 'an owner given as !!binary (a string to kubectl)', text: 'kind: Pod\nmetadata:\n  ownerReferences:\n  - !!binary aGk=\n', message: 'metadata.ownerReferences[0]: a string ("hi"), where Kubernetes expects an object' },
    { what: 'ownerReferences as an object', text: 'kind: Pod\nmetadata:\n  ownerReferences: {name: a}\n', message: 'metadata.ownerReferences: an object, where Kubernetes expects a list' },
    { what: 'a uid as a number', text: 'kind: Pod\nmetadata:\n  ownerReferences:\n  - {uid: 42}\n', message: 'metadata.ownerReferences[0].uid: a number, where Kubernetes expects a string' },
    { what: 'an annotation value as a number', text: 'kind: Pod\nmetadata:\n  annotations: {a: 1}\n', message: 'metadata.annotations["a"]: a number, where Kubernetes expects a string' },
    { what: 'a sequence of pods', text: '- kind: Pod\n- kind: Pod\n', message: 'the input is a list, not a Pod manifest' },
    { what: 'volumes as a map', text: 'kind: Pod\nspec:\n  volumes: {podinfo: {}}\n', message: 'spec.volumes: an object, where Kubernetes expects a list' },
  ])('$what', ({ text, message }) => {
    expect(parse(text)).toThrow(InputError);
    expect(parse(text)).toThrow(message);
  });

  it('reads YAML 1.1 as kubectl does: yes is a boolean', () => {
    expect(parsePod(Buffer.from('kind: Pod\nmetadata:\n  ownerReferences:\n  - {name: a, controller: yes}\n')).metadata?.ownerReferences?.[0]?.controller).toBe(true);
  });

  it('accepts null for optional fields, as Go does for pointers', () => {
    expect(parsePod(Buffer.from('kind: Pod\nmetadata:\n  ownerReferences:\n  - {name: a, controller: null}\n')).metadata?.ownerReferences).toHaveLength(1);
  });
});
