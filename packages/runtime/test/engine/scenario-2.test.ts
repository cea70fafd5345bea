import { join } from 'node:path';
import {
  type RuntimeEvent,
  RuntimeEventSchema,
  type SessionSnapshot,
  SessionSnapshotSchema,
  validateEventProfile,
} from '@oar/protocol';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  fixture,
  LIME_SCHEMA_VERSION,
  type PublishedValidators,
  publishedValidators,
} from '../../../protocol/test/support/agentruntime.js';
import { Store } from '../../src/index.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, ofType, payload } from './helpers.js';

/**
 * Acceptance scenario 2 of the Agent Runtime standard, Lime profile fixture validation: "A Lime-profile runtime
 * publishes at least one valid fixture for submit turn, action required, failed task attempt, routing single
 * candidate, evidence export, and thread read snapshot. Each fixture carries `schemaVersion:
 * "lime-profile-0.4.0"`, stable correlation ids, and typed payloads."
 *
 * OAR publishes its own profile (`oar-0.1.0`, a superset of the Lime rules), so the fixtures here are the runtime's
 * own output: one session in which it accepts a turn that asks to write (`turn.submitted`, `action.required`), routes
 * to its one model (`routing.single_candidate`), runs a task whose first attempt fails (`task.attempt.failed`) and
 * whose retry completes, and exports its evidence (`evidence.changed`); then its session snapshot. What the
 * protocol tests do with the vendored Lime fixtures is done to these: each, stamped with the Lime profile's version
 * (the only field by which the profiles differ), is valid under the published Lime profile schema exactly as
 * published, passes the profile rules under that version, parses losslessly with the typed schemas (typed payloads),
 * and has the type of the Lime fixture it stands for; its correlation ids are the ids the read models, the other
 * facts and the export use for the same things, the same after a restart.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

/** The published Lime profile schemas, `schemaVersion` const as published. */
let lime: PublishedValidators;
beforeAll(() => {
  lime = publishedValidators(LIME_SCHEMA_VERSION);
});

function ajvErrors(validate: (data: unknown) => boolean): string {
  return JSON.stringify((validate as unknown as { errors?: unknown }).errors ?? null);
}

/** The runtime's event as a Lime-profile fixture: the same event under the Lime profile's version. */
function asLime<T extends object>(value: T): T {
  return { ...value, schemaVersion: LIME_SCHEMA_VERSION };
}

/** What the protocol tests check of a vendored Lime event fixture, checked of one the runtime emitted. */
function expectLimeEventFixture(event: RuntimeEvent | undefined, fixtureFile: string): RuntimeEvent {
  expect(event, fixtureFile).toBeDefined();
  const emitted = event as RuntimeEvent;
  expect(emitted.type).toBe(fixture(fixtureFile).type);
  const stamped = asLime(emitted);
  if (!lime.limeEvent(stamped)) expect.fail(`${fixtureFile}: rejected: ${ajvErrors(lime.limeEvent)}`);
  expect(validateEventProfile(stamped, { schemaVersion: LIME_SCHEMA_VERSION })).toEqual([]);
  // Typed payloads: it parses losslessly with the type's schema, and under OAR's own version it is OAR's.
  expect(RuntimeEventSchema.parse(emitted)).toEqual(emitted);
  expect(validateEventProfile(emitted)).toEqual([]);
  // The only difference: the profile's version (the published schema pins it).
  expect(lime.limeEvent(emitted)).toBe(false);
  return emitted;
}

describe('acceptance scenario 2: Lime profile fixture validation', () => {
  it("the runtime's own submit, action, failed attempt, routing, evidence and snapshot are valid Lime fixtures", async () => {
    const script = {
      steps: [
        {
          ...act([{ id: 'w1', type: 'tool', name: 'write', args: { filePath: 'notes.md', content: 'notes\n' } }]),
          alternatives: [
            {
              ifPrompt: 'Build the project',
              error: { message: 'provider refused', statusCode: 400, retryable: false },
            },
          ],
        },
        { ...answer('Written.'), alternatives: [{ ifPrompt: 'Build the project', ...answer('Built.') }] },
      ],
    };
    h = await harness(script);
    const rt = h.runtime;
    const { sessionId, threadId } = await rt.createSession();
    const submitted = await rt.submitTurn({ sessionId, input: 'write notes.md' });
    await rt.settled(sessionId);
    const pending = (await rt.getThreadRead({ sessionId, threadId })).pendingRequests[0];
    await rt.createTask({ sessionId, taskId: 'build', title: 'Build', objective: 'Build the project' });
    const firstRun = await rt.startTask({ sessionId, taskId: 'build' });
    await rt.settled(sessionId);
    const retry = await rt.retryTask({ sessionId, taskId: 'build' });
    await rt.respondAction({ sessionId, actionId: pending?.actionId as string, decision: 'approve' });
    await rt.settled(sessionId);
    const pack = await rt.exportEvidence(sessionId);
    const events = await allEvents(h, sessionId);
    const { snapshot } = await rt.getSession({ sessionId });

    // submit turn
    const submit = expectLimeEventFixture(
      ofType(events, 'turn.submitted').find((e) => e.turnId === submitted.turnId),
      'submit-turn-event.json',
    );
    expect(submit).toMatchObject({ threadId, turnId: submitted.turnId, payload: { status: 'accepted' } });

    // action required
    const required = expectLimeEventFixture(
      ofType(events, 'action.required')[0],
      'tool-approval-action-required-event.json',
    );
    expect(required).toMatchObject({ threadId, turnId: submitted.turnId, actionId: pending?.actionId });
    expect(payload(required)).toMatchObject({ actionType: 'tool_approval', toolName: 'write' });
    expect(ofType(events, 'action.resolved')[0]?.actionId).toBe(required.actionId);

    // failed task attempt
    const failedAttempt = expectLimeEventFixture(
      ofType(events, 'task.attempt.failed')[0],
      'task-retry-attempt-failed-event.json',
    );
    expect(failedAttempt).toMatchObject({ taskId: 'build', runId: firstRun.runId, payload: { retryable: true } });
    const task = snapshot.tasks.find((t) => t.taskId === 'build');
    expect(task?.attempts?.map((a) => [a.runId, a.status])).toEqual([
      [firstRun.runId, 'failed'],
      [retry.runId, 'completed'],
    ]);
    expect(task?.threadId).toBe(failedAttempt.threadId);

    // routing single candidate: one per turn, each joined to its turn
    const routed = ofType(events, 'routing.single_candidate');
    expect(routed.length).toBeGreaterThanOrEqual(3);
    for (const event of routed) expectLimeEventFixture(event, 'routing-single-candidate-event.json');
    expect(routed[0]).toMatchObject({ threadId, turnId: submitted.turnId, payload: { candidateCount: 1 } });

    // evidence export
    const evidence = expectLimeEventFixture(events.at(-1), 'evidence-export-event.json');
    expect(evidence).toMatchObject({ evidenceId: pack.evidenceId });
    expect(payload(evidence).packRef).toBe(`runtime://evidence/${pack.evidenceId}`);
    expect(snapshot.evidenceRefs).toEqual([payload(evidence).packRef]);

    // thread read snapshot
    const stamped = asLime(snapshot) as SessionSnapshot;
    if (!lime.limeSnapshot(stamped)) expect.fail(`snapshot rejected: ${ajvErrors(lime.limeSnapshot)}`);
    expect(SessionSnapshotSchema.parse(snapshot)).toEqual(snapshot);
    expect(lime.limeSnapshot(snapshot)).toBe(false);
    assertSnapshotConforms(snapshot);
    // Its ids are the facts' ids.
    const main = snapshot.threads.find((t) => t.threadId === threadId);
    expect(main?.turns.map((t) => t.turnId)).toContain(submitted.turnId);
    expect(snapshot.threads.map((t) => t.threadId)).toContain(failedAttempt.threadId);
    expect(pack).toMatchObject({ sessionId, runtimeId: snapshot.runtimeId, correlation: { sessionId } });
    expect(pack.correlation.turnIds).toContain(submitted.turnId);
    expect(pack.correlation.taskIds).toContain('build');
    expect(pack.correlation.runIds).toEqual(expect.arrayContaining([firstRun.runId, retry.runId]));
    expect(pack.correlation.decisionIds).toEqual([required.actionId]);
    for (const event of events) expect(event.runtimeId).toBe(snapshot.runtimeId);

    // Stable: after a restart, the log, the snapshot and a replay give the same ids.
    const { dir, workspace } = h;
    await h.runtime.close();
    await h.store.close();
    h = await harness(script, { store: await Store.open(join(dir, 'oar.db')), workspaceRoot: workspace });
    expect(await allEvents(h, sessionId)).toEqual(events);
    const again = (await h.runtime.getSession({ sessionId })).snapshot;
    // (The order of `tasks` is not kept across the restart: compared by id.)
    const byId = (s: SessionSnapshot) => ({
      ...s,
      tasks: [...s.tasks].sort((a, b) => a.taskId.localeCompare(b.taskId)),
    });
    expect(byId(again)).toEqual(byId(snapshot));
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
    assertEventsConform(events);
  });
});
