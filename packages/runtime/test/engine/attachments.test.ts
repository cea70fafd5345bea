import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_TURN_ATTACHMENT_BYTES, MAX_TURN_ATTACHMENTS } from '../../src/index.js';
import { inProcess } from '../runners/probe.js';
import { type Harness, harness } from './harness.js';
import { allEvents, errorCode, ofType, payload, recordingModel } from './helpers.js';

/**
 * Files attached to a turn (docs/engine.md "Turn attachments"): stored as redacted artifacts in the submit's own
 * transaction, recorded on `turn.submitted` and the turn, shown to the model by ref and to a runner as
 * `input.attachments`; a bad attachment is refused with a structured error naming it, and nothing is recorded.
 */

const opened: Harness[] = [];
afterEach(async () => {
  for (const h of opened.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
});

const KEY = 'sk-proj-Ab3dE5fG7hJ9kL1mN3pQ5rS7tV9wX1yZ3aB5';
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 1, 2, 255]);

interface Attachment {
  artifactId: string;
  name: string;
  mimeType: string;
  size: number;
  uri: string;
}

describe('a turn with attachments', () => {
  it('stores each as a redacted artifact, records it on the turn and shows the model its ref', async () => {
    const recorder = recordingModel({ steps: [{ protocol: { kind: 'answer', message: 'read them' } }] });
    const h = await harness({ steps: [] }, { model: recorder.model });
    opened.push(h);
    const { sessionId } = await h.runtime.createSession({});
    await h.runtime.submitTurn({
      sessionId,
      input: 'summarize the attached files',
      attachments: [
        { name: 'notes.txt', text: `the plan\nkey=${KEY}\n` },
        { name: 'logo.png', mimeType: 'image/png', base64: PNG.toString('base64') },
      ],
    });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const attachments = payload(ofType(events, 'turn.submitted')[0]).attachments as Attachment[];
    expect(attachments.map((a) => [a.name, a.mimeType])).toEqual([
      ['notes.txt', 'text/plain'],
      ['logo.png', 'image/png'],
    ]);
    // Stored, redacted: the key never reaches the artifact, the log or the model.
    const notes = await h.runtime.getArtifact({ sessionId, artifactId: attachments[0]?.artifactId as string });
    expect(new TextDecoder().decode(notes?.bytes)).toBe('the plan\nkey=[REDACTED:openai_key]\n');
    const logo = await h.runtime.getArtifact({ sessionId, artifactId: attachments[1]?.artifactId as string });
    expect(Buffer.from(logo?.bytes ?? new Uint8Array())).toEqual(PNG);
    expect(attachments[1]?.size).toBe(PNG.length);
    expect(ofType(events, 'artifact.changed').map((e) => e.artifactId)).toEqual(attachments.map((a) => a.artifactId));
    expect(ofType(events, 'output.redacted').map((e) => payload(e).artifactId)).toEqual([attachments[0]?.artifactId]);
    expect(JSON.stringify(events)).not.toContain(KEY);
    // The model is told what came with the turn, by ref.
    const prompt = recorder.prompts[0]?.text ?? '';
    expect(prompt).toContain(`notes.txt (text/plain, ${attachments[0]?.size} bytes): ${attachments[0]?.uri}`);
    expect(prompt).toContain(`logo.png (image/png, ${PNG.length} bytes): ${attachments[1]?.uri}`);
    expect(prompt).not.toContain('the plan');
    // And the snapshot's turn lists them.
    const { snapshot } = await h.runtime.getSession({ sessionId, limit: 0 });
    expect(snapshot.threads[0]?.turns[0]?.attachments).toEqual(attachments);
  });

  it('hands them to a runner as input.attachments, readable through artifacts.read_range', async () => {
    const seen: unknown[] = [];
    const runner = inProcess(async (ctx, { api, emit }) => {
      seen.push(ctx.input.attachments);
      const ref = ctx.input.attachments[0];
      const read = await api.artifacts.read_range(ref?.artifact_id as string);
      seen.push(Buffer.from(read.data, read.encoding === 'base64' ? 'base64' : 'utf8').toString());
      await emit('message.completed', { message: { role: 'assistant', content: 'ok' } });
    });
    const h = await harness({ steps: [] }, { mainAgent: { name: 'main', runner } });
    opened.push(h);
    const { sessionId } = await h.runtime.createSession({});
    await h.runtime.submitTurn({ sessionId, input: 'go', attachments: [{ name: 'data.csv', text: 'a,b\n1,2\n' }] });
    await h.runtime.settled(sessionId);
    const [refs, content] = seen;
    expect(refs).toEqual([
      { artifact_id: expect.stringMatching(/^art_/), name: 'data.csv', mime_type: 'text/plain', size: 8 },
    ]);
    expect(content).toBe('a,b\n1,2\n');
  });
});

describe('a bad attachment', () => {
  async function refused(attachments: unknown[], limits: Record<string, number> = {}) {
    const h = await harness({ steps: [] }, limits.maxArtifactBytes ? { limits: limits as never } : {});
    opened.push(h);
    const { sessionId } = await h.runtime.createSession({});
    let error: { code: string; details?: Record<string, unknown> } | undefined;
    try {
      await h.runtime.submitTurn({ sessionId, input: 'go', attachments: attachments as never });
    } catch (e) {
      error = (e as { error: typeof error }).error;
    }
    const events: RuntimeEvent[] = await allEvents(h, sessionId);
    // Nothing of the refused turn is recorded, and no artifact row is left behind.
    expect(ofType(events, 'turn.submitted')).toEqual([]);
    const rows = await h.store.db.selectFrom('oar_artifacts').select('id').execute();
    expect(rows).toEqual([]);
    return error;
  }

  it('is refused with invalid_input naming the field, and nothing is recorded', async () => {
    expect(await refused([{ name: 'a.txt', text: 'x', base64: 'eA==' }])).toMatchObject({
      code: 'invalid_input',
      details: { field: 'attachments/0/text' },
    });
    expect(
      await refused([
        { name: 'ok.txt', text: 'x' },
        { name: '../etc/passwd', text: 'x' },
      ]),
    ).toMatchObject({
      code: 'invalid_input',
      details: { field: 'attachments/1/name' },
    });
    expect(await refused([{ name: 'b.bin', base64: 'not base64!' }])).toMatchObject({
      details: { field: 'attachments/0/base64' },
    });
    expect(await refused([{ name: 'c.txt', mimeType: 'not a mime', text: 'x' }])).toMatchObject({
      details: { field: 'attachments/0/mimeType' },
    });
    const many = Array.from({ length: MAX_TURN_ATTACHMENTS + 1 }, (_, i) => ({ name: `f${i}.txt`, text: 'x' }));
    expect(await refused(many)).toMatchObject({ code: 'invalid_input', details: { field: 'attachments' } });
    // Together over the turn's cap, though each is within the artifact limit.
    const big = 'x'.repeat(MAX_TURN_ATTACHMENT_BYTES / 4 + 1);
    const heavy = Array.from({ length: 4 }, (_, i) => ({ name: `big${i}.txt`, text: big }));
    expect(await refused(heavy)).toMatchObject({
      code: 'invalid_input',
      details: { field: 'attachments', limit: MAX_TURN_ATTACHMENT_BYTES },
    });
  });

  it('over the binding’s artifact limit is artifact_too_large, naming the attachment', async () => {
    const error = await refused([{ name: 'big.txt', text: 'x'.repeat(2_000) }], { maxArtifactBytes: 1_000 });
    expect(error).toMatchObject({ code: 'artifact_too_large', details: { field: 'attachments/0', limit: 1_000 } });
  });

  it('of the wrong shape is refused where it enters, as invalid_input', async () => {
    const h = await harness({ steps: [] });
    opened.push(h);
    const { sessionId } = await h.runtime.createSession({});
    const submit = h.runtime.submitTurn({ sessionId, input: 'go', attachments: [{ name: 7 }] as never });
    expect(await errorCode(submit)).toBe('invalid_input');
  });
});
