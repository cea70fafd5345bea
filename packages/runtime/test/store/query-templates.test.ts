import { expect, it } from 'vitest';
import { EventLog } from '../../src/log/event-log.js';
import { replay } from '../../src/read-models/project.js';
import { QueryTemplates } from '../../src/store/query-templates.js';
import { harness } from '../engine/harness.js';
import { describeStores } from '../support/stores.js';

/**
 * The hot statements of the event log are compiled once per shape and reused with fresh parameters
 * (store/query-templates.ts). Reuse must bind the new values (never the first call's), a shape whose parameters
 * are not what the builder binds must fall back to building (still correct), and a real turn must hit the
 * templates for every statement a step makes — on both dialects, whose placeholders differ.
 */
describeStores('query templates', (factory) => {
  it('a reused text binds the new parameters, not the first ones', async () => {
    const { store } = await factory.fresh();
    const templates = new QueryTemplates();
    const db = store.db;
    const insert = (id: string, title: string) =>
      templates.execute(
        db,
        'insert session',
        () =>
          db.insertInto('oar_sessions').values({
            id,
            runtime_id: 'rt_t',
            title,
            created_at: '2026-01-01T00:00:00.000Z',
            updated_at: '2026-01-01T00:00:00.000Z',
            last_sequence: 0,
          }),
        [id, 'rt_t', title, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', 0],
      );
    await insert('ses_a', 'first');
    await insert('ses_b', 'second');
    expect(templates.reused()).toEqual(['insert session']);
    const select = (id: string) =>
      templates.execute(db, 'title', () => db.selectFrom('oar_sessions').select('title').where('id', '=', id), [id]);
    expect((await select('ses_a')).rows).toEqual([{ title: 'first' }]);
    expect((await select('ses_b')).rows).toEqual([{ title: 'second' }]);
    expect((await select('ses_none')).rows).toEqual([]);
  });

  it('a shape whose parameters differ from the compiled ones is built every time, and stays correct', async () => {
    const { store } = await factory.fresh();
    const templates = new QueryTemplates();
    const db = store.db;
    const select = (id: string) =>
      templates.execute(
        db,
        'wrong order',
        () => db.selectFrom('oar_sessions').select('id').where('id', '=', id).where('runtime_id', '=', 'rt_x'),
        // The builder binds [id, 'rt_x']: this order is wrong, so the text must never be reused with it.
        ['rt_x', id],
      );
    expect((await select('ses_1')).rows).toEqual([]);
    expect(templates.reused()).toEqual([]);
    await db
      .insertInto('oar_sessions')
      .values({ id: 'ses_2', runtime_id: 'rt_x', created_at: 't', updated_at: 't', last_sequence: 0 })
      .execute();
    expect((await select('ses_2')).rows).toEqual([{ id: 'ses_2' }]);
  });

  it("a scripted turn runs every statement of its steps from a template, and the log's record is unchanged", async () => {
    const { store } = await factory.fresh();
    const read = (id: string) => ({
      protocol: { kind: 'act', calls: [{ id, type: 'tool', name: 'read', args: { filePath: 'README.md' } }] },
    });
    const h = await harness(
      { steps: [read('read_1'), read('read_2'), read('read_3'), { protocol: { kind: 'answer', message: 'Done.' } }] },
      { store },
    );
    factory.defer(() => h.runtime.close());
    const { sessionId, threadId } = await h.runtime.createSession({ title: 'templates' });
    await h.runtime.submitTurn({ sessionId, input: 'Read the README three times.' });
    await h.runtime.settled(sessionId);
    const thread = await h.runtime.log.thread(sessionId, threadId);
    expect(thread.turns.at(-1)?.status).toBe('completed');

    const templates = (h.runtime.log as unknown as { templates: QueryTemplates }).templates;
    const texts = (templates as unknown as { texts: Map<string, string | null> }).texts;
    // Every shape the log met was found reusable (none fell back to building every time).
    expect([...texts].filter(([, text]) => text === null)).toEqual([]);
    const reused = templates.reused();
    for (const shape of ['advance sequence', 'advance sequence, fenced', 'last sequence']) {
      expect(reused).toContain(shape);
    }
    expect(reused.some((key) => key.startsWith('insert events ×'))).toBe(true);
    expect(reused.some((key) => key.startsWith('upsert read models ×'))).toBe(true);
    if (factory.dialect === 'postgres') expect(reused).toContain('lock session');

    // Sequences are gap-free and the stored read models equal a replay: the reused texts wrote what the built
    // ones would have.
    const events = await h.runtime.log.read(sessionId);
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
    const fresh = new EventLog(store, 'rt_other');
    const stored = await fresh.allReadModels(sessionId);
    const plain = (value: unknown) => JSON.parse(JSON.stringify(value));
    const rebuilt = replay(events);
    expect(plain(stored.session)).toEqual(plain(rebuilt.session));
    expect(plain(Object.fromEntries(stored.threads))).toEqual(plain(Object.fromEntries(rebuilt.threads)));
    expect(plain(Object.fromEntries(stored.runs))).toEqual(plain(Object.fromEntries(rebuilt.runs)));
  });
});
