import { afterEach, describe, expect, it } from 'vitest';
import type { PermissionsConfig } from '../../src/index.js';
import { type OarRuntimeError, Runtime } from '../../src/index.js';
import { type Harness, harness } from '../engine/harness.js';
import { act, allEvents, answer, dsl, errorCode, ofType, sleep, waitFor, waitForEvent } from '../engine/helpers.js';
import { assertEventsConform } from '../support/schemas.js';
import { fields } from './support.js';

/**
 * `write_process_stdin` and `terminate_process` for people and clients (docs/commands.md "Feeding and stopping a
 * process by hand"): a request recorded on the process's thread, carried out by the runtime process that runs it,
 * answered by the fact carrying the request's id. Real processes, unsandboxed (`profile: none`) so these run
 * wherever Node does.
 */
const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close();
});

const permissions: PermissionsConfig = {
  mode: 'accept-edits',
  rules: [{ decision: 'allow', tool: 'exec', command: 'node' }],
};
const exec = { sandbox: { profile: 'none' as const, unsandboxed: 'allow' as const } };
const ECHO_UPPER =
  "process.stdin.on('data', d => process.stdout.write(String(d).toUpperCase())); process.stdin.on('end', () => { console.log('bye'); process.exit(0) })";
const IDLE = ['node', '-e', 'setInterval(() => {}, 1000)'];

async function opened(steps: Parameters<typeof harness>[0]['steps']): Promise<Harness> {
  const h = await harness({ steps }, { exec, permissions });
  open.push({ close: () => h.store.close() }, { close: () => h.runtime.close() });
  return h;
}

/** A session whose turn started `command` in the background and ended; the process runs on. */
async function backgroundSession(command: string[]) {
  const h = await opened([
    act([{ id: 'start', type: 'tool', name: 'exec', args: { command, background: true } }]),
    answer('started'),
  ]);
  const { sessionId, threadId } = await h.runtime.createSession();
  await h.runtime.submitTurn({ sessionId, input: 'start it' });
  await h.runtime.settled(sessionId);
  const started = fields(ofType(await allEvents(h, sessionId), 'process.started')[0]);
  return { h, sessionId, threadId, processId: started.processId as string };
}

describe('write_process_stdin and terminate_process', () => {
  it("feeds a background process after its turn ended, then stops it: each answer carries the request's id", async () => {
    const { h, sessionId, threadId, processId } = await backgroundSession(['node', '-e', ECHO_UPPER]);
    const written = await h.runtime.writeProcessStdin({
      sessionId,
      processId,
      input: 'abc\n',
      requestedBy: 'user:ada',
    });
    expect(written).toMatchObject({ sessionId, threadId, processId, status: 'written', bytes: 4 });
    const input = (await allEvents(h, sessionId)).find((e) => e.eventId === written.eventId);
    expect(input?.type).toBe('process.input');
    expect(fields(input)).toMatchObject({ processId, bytes: 4, closed: false, requestId: written.requestId });
    expect(fields(input).requestedBy).toBe('user:ada');

    // A text is handed to the process outside the log: the process gets all of it, the record only its size.
    const typed = await h.runtime.writeProcessStdin({ sessionId, processId, input: 'password=hunter2\n' });
    expect(typed).toMatchObject({ status: 'written', bytes: 17 });
    expect(JSON.stringify(await allEvents(h, sessionId))).not.toContain('hunter2');
    const leftover = await h.store.db
      .selectFrom('oar_state')
      .selectAll()
      .where('scope', 'like', 'process-input:%')
      .execute();
    expect(leftover).toEqual([]);
    await sleep(300);

    const stopped = await h.runtime.terminateProcess({ sessionId, processId, reason: 'done with it' });
    expect(stopped).toMatchObject({ processId, status: 'terminated' });
    const events = await allEvents(h, sessionId);
    const terminated = events.find((e) => e.eventId === stopped.eventId);
    expect(terminated?.type).toBe('process.terminated');
    const end = fields(terminated);
    expect(end).toMatchObject({ processId, reason: 'terminated', requestId: stopped.requestId });
    // Its whole output is kept, as when the model's process tool stops it.
    const artifact = await h.runtime.getArtifact({
      sessionId,
      artifactId: String(end.outputRef).replace('artifact://', ''),
    });
    // The process got the password itself (it echoed it upper-cased: a redacted text would read `[REDACTED:PASSWORD]`),
    // and its stored output is redacted, as every output is.
    expect(new TextDecoder().decode(artifact.bytes)).toBe('ABC\nPASSWORD=[REDACTED:password]\n');
    // The requests are recorded on the thread, and gone from it once answered, as the process is.
    const requests = ofType(events, 'thread.updated').filter((e) => fields(e).processRequest);
    expect(requests.map((e) => (fields(e).processRequest as { action: string }).action)).toEqual([
      'write',
      'write',
      'terminate',
    ]);
    expect(fields(requests[1]).processRequest).toMatchObject({
      inputBytes: 17,
      inputDigest: expect.stringMatching(/^sha256:/),
    });
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect((read as { processes?: unknown[] }).processes).toBeUndefined();
    const thread = await h.runtime.log.thread(sessionId, threadId);
    expect(thread.processRequests).toEqual([]);
    assertEventsConform(events);

    // Ended: there is nothing left to feed or stop.
    expect(await errorCode(h.runtime.terminateProcess({ sessionId, processId }))).toBe('process_not_found');
    expect(await errorCode(h.runtime.writeProcessStdin({ sessionId, processId, input: 'x' }))).toBe(
      'process_not_found',
    );
  });

  it('a process that ended by itself answers a request with its end', async () => {
    const { h, sessionId, processId } = await backgroundSession(['node', '-e', ECHO_UPPER]);
    const closed = await h.runtime.writeProcessStdin({ sessionId, processId, input: 'last\n', closeStdin: true });
    expect(closed).toMatchObject({ status: 'written', bytes: 5 });
    // It prints "bye" and exits on end of input; its end is not on record until someone looks.
    await waitFor(async () => {
      const known = await h.runtime.getExecutionEnvironment({ sessionId });
      return known.activeProcesses.length === 1 ? true : undefined;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const reply = await h.runtime.terminateProcess({ sessionId, processId });
    expect(reply).toMatchObject({ status: 'ended', exitCode: 0 });
    const end = (await allEvents(h, sessionId)).find((e) => e.eventId === reply.eventId);
    expect(end?.type).toBe('process.completed');
    expect(fields(end).requestId).toBe(reply.requestId);
  });

  it('stops a foreground command mid-call: the call fails with process_terminated and the turn goes on', async () => {
    const h = await opened([
      dsl([
        {
          id: 'hang',
          executor: { type: 'tool', target: 'exec' },
          input: { command: IDLE },
          failure_policy: { on_failure: 'continue', max_attempts: 3 },
        },
      ]),
      answer('it was stopped'),
    ]);
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'run it' });
    const started = await waitForEvent(h, sessionId, 'process.started');
    const processId = fields(started).processId as string;
    // A foreground command's input is closed from the start.
    expect(await errorCode(h.runtime.writeProcessStdin({ sessionId, processId, input: 'x' }))).toBe(
      'process_input_closed',
    );
    const reply = await h.runtime.terminateProcess({ sessionId, processId, reason: 'hung' });
    expect(reply).toMatchObject({ processId, status: 'terminated' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(fields(ofType(events, 'process.terminated')[0])).toMatchObject({ processId, reason: 'terminated' });
    const failed = ofType(events, 'tool.failed')[0];
    expect((fields(failed).error as { code: string }).code).toBe('process_terminated');
    // Cancelled by a person, not failed: a failure policy with attempts to spare does not run it again.
    expect(failed?.status).toBe('cancelled');
    expect(ofType(events, 'process.started')).toHaveLength(1);
    expect(ofType(events, 'turn.completed')).toHaveLength(1);
  });

  it('a runtime without a worker records the request; the runtime running the process carries it out', async () => {
    const { h, sessionId, processId } = await backgroundSession(['node', '-e', ECHO_UPPER]);
    const client = await Runtime.create({
      store: h.store,
      workspaceRoot: h.workspace,
      worker: false,
      model: () => {
        throw new Error('a control plane calls no model');
      },
    });
    open.push(client);
    const asked = await client.writeProcessStdin({ sessionId, processId, input: 'hi\n', waitMs: 0 });
    expect(asked).toMatchObject({ status: 'requested' });
    expect(asked.eventId).toBeUndefined();
    const input = await waitForEvent(h, sessionId, 'process.input');
    expect(fields(input)).toMatchObject({ requestId: asked.requestId, bytes: 3 });
    // Waiting, the same client sees the answer.
    const stopped = await client.terminateProcess({ sessionId, processId, waitMs: 10_000 });
    expect(stopped.status).toBe('terminated');
  });

  it('closing the runtime stops its processes and records their end: no session lists them as running', async () => {
    const { h, sessionId, processId } = await backgroundSession(['node', '-e', ECHO_UPPER]);
    await h.runtime.writeProcessStdin({ sessionId, processId, input: 'kept\n' });
    // Time for it to echo the line before the runtime closes.
    await sleep(300);
    await h.runtime.close();
    const reopened = await Runtime.create({
      store: h.store,
      workspaceRoot: h.workspace,
      worker: false,
      model: () => {
        throw new Error('no model here');
      },
    });
    open.push(reopened);
    const events = await reopened.log.read(sessionId);
    const end = fields(ofType(events, 'process.terminated')[0]);
    expect(end).toMatchObject({ processId, reason: 'runtime_closing' });
    const artifact = await reopened.getArtifact({
      sessionId,
      artifactId: String(end.outputRef).replace('artifact://', ''),
    });
    expect(new TextDecoder().decode(artifact.bytes)).toBe('KEPT\n');
    expect((await reopened.getExecutionEnvironment({ sessionId })).activeProcesses).toEqual([]);
    expect(await errorCode(reopened.terminateProcess({ sessionId, processId }))).toBe('process_not_found');
  });

  it('requests for a process no runtime here runs wait on record, at most 16 of them', async () => {
    const h = await opened([answer('ok')]);
    const { sessionId, threadId } = await h.runtime.createSession();
    // A process another runtime process started (and runs): its start is on record, nobody here has it.
    await h.runtime.log.append(sessionId, [
      {
        type: 'process.started',
        threadId,
        processId: 'proc_elsewhere',
        payload: { processId: 'proc_elsewhere', command: 'npm run dev', background: true },
      },
    ]);
    for (let i = 0; i < 16; i++) {
      const asked = await h.runtime.writeProcessStdin({
        sessionId,
        processId: 'proc_elsewhere',
        input: `${i}\n`,
        waitMs: 0,
      });
      expect(asked.status).toBe('requested');
    }
    const error = await h.runtime
      .terminateProcess({ sessionId, processId: 'proc_elsewhere', waitMs: 0 })
      .catch((e: unknown) => e as OarRuntimeError);
    expect((error as OarRuntimeError).error).toMatchObject({
      code: 'too_many_process_requests',
      retryable: true,
      details: { pending: 16, max: 16 },
    });
    const thread = await h.runtime.log.thread(sessionId, threadId);
    expect(thread.processRequests).toHaveLength(16);
  });

  it('refuses bad requests with structured errors and records nothing for them', async () => {
    const { h, sessionId, processId } = await backgroundSession(IDLE);
    const before = (await allEvents(h, sessionId)).length;
    expect(await errorCode(h.runtime.terminateProcess({ sessionId, processId: 'proc_nope' }))).toBe(
      'process_not_found',
    );
    expect(await errorCode(h.runtime.terminateProcess({ sessionId: 'ses_nope', processId }))).toBe('session_not_found');
    expect(await errorCode(h.runtime.writeProcessStdin({ sessionId, processId }))).toBe('invalid_input');
    expect(await errorCode(h.runtime.writeProcessStdin({ sessionId, processId, input: 'x'.repeat(100_001) }))).toBe(
      'payload_too_large',
    );
    expect(await errorCode(h.runtime.terminateProcess({ sessionId, processId, waitMs: -1 } as never))).toBe(
      'invalid_input',
    );
    expect((await allEvents(h, sessionId)).length).toBe(before);
    await h.runtime.terminateProcess({ sessionId, processId });
  });
});
