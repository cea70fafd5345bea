import { describe, expect, it } from 'vitest';
import { LangbotConnection, MAX_INFLIGHT, MAX_QUEUED_REFUSALS } from '../../src/agent-runners/langbot/connection.js';
import {
  CHUNK_BYTES,
  classify,
  encodeMessage,
  MAX_MESSAGE_FRAGMENTS,
  MessageReader,
  splitUtf8,
} from '../../src/agent-runners/langbot/frames.js';
import { Handshake } from '../../src/agent-runners/langbot/handshake.js';

/** LangBot's frame codec and peer on their own: classification, chunking both ways, and the bounds of reassembly. */

function reader() {
  const messages: string[] = [];
  const logs: string[] = [];
  const faults: string[] = [];
  const r = new MessageReader(
    (m) => messages.push(m),
    (l) => logs.push(l),
    (e) => faults.push(`${e.code}: ${String(e.details.chunk)}`),
  );
  return { r, messages, logs, faults };
}

describe("LangBot's frames", () => {
  it('tells requests, responses, log lines and malformed frames apart', () => {
    expect(classify('{"seq_id": 1, "action": "run_agent", "data": {}}').kind).toBe('request');
    expect(classify('{"seq_id": 1, "code": 0, "message": "success", "data": {}}').kind).toBe('response');
    expect(classify('INFO plugin started').kind).toBe('log');
    expect(classify('{"hello": "world"}').kind).toBe('log');
    expect(classify('{"seq_id": "x", "action": 3}')).toMatchObject({ kind: 'invalid', isRequest: true });
  });

  it('splits a long message into chunks on code point boundaries, and reassembles it', () => {
    const message = { seq_id: 1, action: 'x', data: { text: `${'é'.repeat(20_000)}🙂${'a'.repeat(9_000)}` } };
    const lines = encodeMessage(message);
    expect(lines.length).toBeGreaterThan(3);
    expect(JSON.parse(lines[0] as string)).toMatchObject({ type: 'chunk_start' });
    for (const line of lines.slice(1, -1)) {
      const data = (JSON.parse(line) as { data: string }).data;
      expect(Buffer.byteLength(data)).toBeLessThanOrEqual(CHUNK_BYTES);
    }
    const { r, messages, faults } = reader();
    for (const line of lines) r.line(line);
    expect(faults).toEqual([]);
    expect(JSON.parse(messages[0] as string)).toEqual(message);
    expect(splitUtf8('🙂🙂', 4)).toEqual(['🙂', '🙂']);
  });

  it("refuses a chunk sequence that breaks the bounds, with OAR's wire fault names (the check in details.chunk)", () => {
    const oversize = reader();
    oversize.r.line(JSON.stringify({ type: 'chunk_start', total_size: 17 * 1024 * 1024 }));
    expect(oversize.faults).toEqual(['frame_too_large: declared_too_large']);
    const past = reader();
    past.r.line(JSON.stringify({ type: 'chunk_start', total_size: 3 }));
    past.r.line(JSON.stringify({ type: 'chunk_data', data: 'abcd', offset: 0 }));
    expect(past.faults).toEqual(['frame_too_large: past_declared_size']);
    const gap = reader();
    gap.r.line(JSON.stringify({ type: 'chunk_start', total_size: 10 }));
    gap.r.line(JSON.stringify({ type: 'chunk_data', data: 'ab', offset: 5 }));
    expect(gap.faults).toEqual(['invalid_frame: offset_mismatch']);
    const short = reader();
    short.r.line(JSON.stringify({ type: 'chunk_start', total_size: 10 }));
    short.r.line(JSON.stringify({ type: 'chunk_data', data: 'ab', offset: 0 }));
    short.r.line(JSON.stringify({ type: 'chunk_end' }));
    expect(short.faults).toEqual(['invalid_frame: incomplete']);
    const many = reader();
    many.r.line(JSON.stringify({ type: 'chunk_start', total_size: 1_000_000 }));
    for (let i = 0; i <= MAX_MESSAGE_FRAGMENTS; i++)
      many.r.line(JSON.stringify({ type: 'chunk_data', data: '', offset: 0 }));
    expect(many.faults).toEqual(['frame_too_large: too_many_fragments']);
    const negative = reader();
    negative.r.line(JSON.stringify({ type: 'chunk_start', total_size: -1 }));
    expect(negative.faults).toEqual(['invalid_frame: negative_size']);
    const stray = reader();
    stray.r.line(JSON.stringify({ type: 'chunk_end' }));
    expect(stray.faults).toEqual(['invalid_frame: unexpected_chunk']);
  });
});

describe('a LangBot peer', () => {
  it('answers a single request, a stream, and refuses a malformed request by its seq_id', async () => {
    const sent: Record<string, unknown>[] = [];
    const logs: string[] = [];
    const peer = new LangbotConnection(
      async (line) => {
        sent.push(JSON.parse(line) as Record<string, unknown>);
      },
      async (action, _data, stream) => {
        if (action === 'stream') {
          await stream.send({ n: 1 });
          await stream.send({ n: 2 });
          return undefined;
        }
        if (action === 'fail') throw new Error('no');
        return { ok: true };
      },
      (line) => logs.push(line),
      () => undefined,
    );
    peer.receive(JSON.stringify({ seq_id: 7, action: 'one', data: {} }));
    peer.receive(JSON.stringify({ seq_id: 8, action: 'stream', data: {} }));
    peer.receive(JSON.stringify({ seq_id: 9, action: 'fail', data: {} }));
    peer.receive(JSON.stringify({ seq_id: 10, action: 'x', data: 'not an object' }));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(sent).toContainEqual(expect.objectContaining({ seq_id: 7, code: 0, data: { ok: true } }));
    expect(sent.filter((m) => m.seq_id === 8).map((m) => [m.chunk_status, m.data])).toEqual([
      ['continue', { n: 1 }],
      ['continue', { n: 2 }],
      ['end', {}],
    ]);
    expect(sent.find((m) => m.seq_id === 9)).toMatchObject({ code: 1, message: 'runtime_error: no' });
    expect(sent.find((m) => m.seq_id === 10)).toMatchObject({ code: 1 });
    expect(logs).toEqual([expect.stringContaining('malformed request')]);
    // A call resolves with its first response; a stream with its end, after every chunk.
    const call = peer.call('get', {});
    const chunks: unknown[] = [];
    const stream = peer.stream('run', {}, (d) => {
      chunks.push(d);
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    const [callId, streamId] = sent.slice(-2).map((m) => m.seq_id);
    peer.receive(JSON.stringify({ seq_id: callId, code: 0, message: 'success', data: { a: 1 } }));
    peer.receive(JSON.stringify({ seq_id: streamId, code: 0, message: 'success', data: { r: 1 } }));
    peer.receive(JSON.stringify({ seq_id: streamId, code: 0, message: 'success', data: {}, chunk_status: 'end' }));
    expect(await call).toEqual({ a: 1 });
    await stream;
    expect(chunks).toEqual([{ r: 1 }]);
    const failing = peer.call('bad', {});
    await new Promise((resolve) => setTimeout(resolve, 10));
    peer.receive(JSON.stringify({ seq_id: sent.at(-1)?.seq_id, code: 1, message: 'Action bad not found', data: {} }));
    await expect(failing).rejects.toThrow('Action bad not found');
  });
});

describe('a LangBot peer flooded with requests by a plugin that does not read its answers', () => {
  it('refuses past MAX_INFLIGHT, and faults once MAX_QUEUED_REFUSALS refusals wait unwritten', async () => {
    const faults: string[] = [];
    let written = 0;
    const peer = new LangbotConnection(
      // The plugin never reads stdin: no write ever completes.
      () => {
        written++;
        return new Promise<void>(() => undefined);
      },
      // Every request runs until the connection ends.
      (_action, _data, stream) =>
        new Promise((_resolve, reject) => stream.signal.addEventListener('abort', () => reject(stream.signal.reason))),
      () => undefined,
      (error) => faults.push(`${error.code}: ${error.message}`),
    );
    for (let seq = 1; seq <= MAX_INFLIGHT + MAX_QUEUED_REFUSALS; seq++) {
      peer.receive(JSON.stringify({ seq_id: seq, action: 'hold', data: {} }));
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(faults).toEqual([]);
    expect(written).toBe(1);
    peer.receive(JSON.stringify({ seq_id: 100_000, action: 'hold', data: {} }));
    expect(faults).toEqual([expect.stringMatching(/^rate_limited: more than 128 refused requests/)]);
    expect(peer.closed).toBe(true);
  });
});

describe("LangBot's registration handshake", () => {
  it('refuses a production registration naming another capability, and a second registration', async () => {
    const peer = new LangbotConnection(
      async () => undefined,
      async () => undefined,
      () => undefined,
      () => undefined,
    );
    const handshake = new Handshake(peer, 'the-capability');
    await expect(handshake.register({ prod_mode: true, registration_capability: 'another' })).rejects.toThrow(
      /capability/,
    );
    await expect(handshake.done).rejects.toThrow(/capability/);
    await expect(handshake.register({ prod_mode: true, registration_capability: 'the-capability' })).rejects.toThrow(
      /already registered/,
    );
  });
});
