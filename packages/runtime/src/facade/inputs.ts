import { z } from 'zod';
import { BindingUpdateSchema } from '../config/binding.js';
import { TurnAttachmentInputSchema } from '../control-plane/attachments.js';
import {
  CancelJobInputSchema,
  JobIdInputSchema,
  ListJobsInputSchema,
  StartJobInputSchema,
} from '../control-plane/jobs.js';
import { OarRuntimeError } from '../kernel/errors.js';

/**
 * The shapes of the control plane's inputs, checked where they enter (`Runtime`'s methods): TypeScript callers
 * cannot pass anything else, but an HTTP or JSON caller can, and an id that is an object or a limit that is 1.5
 * must be refused as `invalid_input` (`invalid_binding` for a binding), never reach SQL or the event schemas as
 * a TypeError or a driver error. Only types and basic bounds here; what the commands know better (a session id's
 * characters, a decision's values, a state value's size) they check themselves.
 */
const Id = z.string().min(1).max(256);
const Text = z.string();
const Count = z.number().int().min(0);

const SessionOnly = z.object({ sessionId: Id });
const Bag = z.record(z.string(), z.unknown());

/** What a person or client says a task is (create_task, update_task); control-plane/task-graph.ts. */
export const TASK_DEFINITION = {
  title: Text.max(500).optional(),
  objective: Text.max(20_000).optional(),
  visibility: z.enum(['foreground', 'background', 'internal', 'hidden']).optional(),
  scope: Bag.optional(),
  constraints: Bag.optional(),
  taskProfile: Bag.optional(),
  priority: Text.max(100).optional(),
  assignee: z
    .discriminatedUnion('kind', [
      z.strictObject({ kind: z.literal('agent'), agent: Id.optional() }),
      z.strictObject({ kind: z.literal('external'), name: Text.max(200).optional() }),
    ])
    .optional(),
  acceptance: z.array(Bag).max(50).optional(),
};
const OnThread = z.object({ sessionId: Id, threadId: Id.optional() });

export const CONTROL_INPUTS = {
  createSession: z
    .strictObject({
      title: Text.optional(),
      sessionId: Id.optional(),
      agent: Id.optional(),
      binding: BindingUpdateSchema.optional(),
      workspaceId: Id.optional(),
      /** Who the session acts for (`user:ada`, `api_key:key_1`): the `sub` of a business tool's credential. */
      actor: z
        .string()
        .regex(/^[A-Za-z0-9_.:@-]{1,200}$/, 'an actor is letters, digits and "_.:@-", such as "user:ada"')
        .optional(),
    })
    .optional(),
  updateBinding: z.object({ sessionId: Id, update: BindingUpdateSchema }),
  forkSession: z.strictObject({
    sessionId: Id,
    at: z.number().int().min(1).optional(),
    forkId: Id.optional(),
    title: Text.max(500).optional(),
  }),
  rollbackThread: z.strictObject({
    sessionId: Id,
    threadId: Id.optional(),
    turnId: Id,
    files: z.enum(['restore', 'keep']).optional(),
    dryRun: z.boolean().optional(),
    requestedBy: Id.optional(),
  }),
  submitTurn: z.object({
    sessionId: Id,
    threadId: Id.optional(),
    turnId: Id.optional(),
    input: Text,
    source: Text.optional(),
    ifBusy: z.enum(['enqueue', 'reject', 'interrupt']).optional(),
    // Checked whole by the command (names, one of text/base64, sizes), which names the field of a bad one.
    attachments: z.array(TurnAttachmentInputSchema).optional(),
  }),
  queuedTurn: z.object({ sessionId: Id, threadId: Id, turnId: Id }),
  interruptTurn: z.object({
    sessionId: Id,
    threadId: Id.optional(),
    reason: Text.optional(),
    waitMs: z.number().min(0).max(3_600_000).optional(),
  }),
  compact: z.object({
    sessionId: Id,
    threadId: Id.optional(),
    reason: Text.optional(),
    waitMs: z.number().min(0).max(3_600_000).optional(),
  }),
  respondAction: z.object({
    sessionId: Id,
    actionId: Id,
    decision: Text,
    reason: Text.optional(),
    payload: z.record(z.string(), z.unknown()).optional(),
    resolvedBy: Id.optional(),
  }),
  closeSubagent: z.object({ sessionId: Id, subagentId: Id, reason: Text.optional() }),
  spawnSubagent: z.strictObject({
    sessionId: Id,
    threadId: Id.optional(),
    agent: Id,
    input: Text.max(100_000),
    title: Text.max(500).optional(),
    subagentId: Id.optional(),
  }),
  sendSubagentInput: z.strictObject({
    sessionId: Id,
    subagentId: Id,
    input: Text.max(100_000),
    ifBusy: z.enum(['enqueue', 'reject', 'interrupt']).optional(),
  }),
  waitSubagents: z.strictObject({
    sessionId: Id,
    subagentIds: z.array(Id).max(100).optional(),
    threadId: Id.optional(),
    timeoutMs: z.number().min(0).max(3_600_000).optional(),
  }),
  resumeSubagent: z.strictObject({
    sessionId: Id,
    subagentId: Id,
    input: Text.max(100_000).optional(),
    reason: Text.max(1_000).optional(),
  }),
  createTask: z.strictObject({
    sessionId: Id,
    taskId: Id.optional(),
    parentTaskId: Id.optional(),
    dependsOn: z.array(Id).max(100).optional(),
    threadId: Id.optional(),
    ...TASK_DEFINITION,
    objective: Text.max(20_000),
  }),
  updateTask: z.strictObject({ sessionId: Id, taskId: Id, ...TASK_DEFINITION, archived: z.literal(true).optional() }),
  startTask: z.strictObject({ sessionId: Id, taskId: Id, threadId: Id.optional() }),
  appendTaskProgress: z.strictObject({
    sessionId: Id,
    taskId: Id,
    message: Text.max(10_000).optional(),
    percent: z.number().min(0).max(100).optional(),
    completed: Count.optional(),
    total: Count.optional(),
    refs: z.array(Id).max(100).optional(),
  }),
  pauseTask: z.strictObject({
    sessionId: Id,
    taskId: Id,
    reason: Text.max(1_000).optional(),
    propagate: z.enum(['none', 'children']).optional(),
  }),
  completeTask: z.strictObject({ sessionId: Id, taskId: Id, summary: Text.max(10_000).optional() }),
  failTask: z.strictObject({
    sessionId: Id,
    taskId: Id,
    error: z.strictObject({ code: Id.optional(), message: Text.min(1).max(10_000) }),
  }),
  linkTasks: z.strictObject({ sessionId: Id, taskId: Id, kind: Id, targetId: Id, reason: Text.max(1_000).optional() }),
  evaluatePermission: z.strictObject({
    sessionId: Id,
    threadId: Id.optional(),
    turnId: Id.optional(),
    toolName: Id,
    input: z.unknown().optional(),
    requestedBy: Id.optional(),
  }),
  resolvePermission: z.strictObject({
    sessionId: Id,
    actionId: Id,
    decision: z.enum(['allow', 'deny']),
    scope: z.enum(['once', 'session']).optional(),
    reason: Text.max(1_000).optional(),
    resolvedBy: Id.optional(),
  }),
  writeProcessStdin: z.strictObject({
    sessionId: Id,
    processId: Id,
    input: Text.optional(),
    closeStdin: z.boolean().optional(),
    reason: Text.max(1_000).optional(),
    requestedBy: Id.optional(),
    waitMs: z.number().min(0).max(600_000).optional(),
  }),
  terminateProcess: z.strictObject({
    sessionId: Id,
    processId: Id,
    reason: Text.max(1_000).optional(),
    requestedBy: Id.optional(),
    waitMs: z.number().min(0).max(600_000).optional(),
  }),
  cancelTask: z.object({
    sessionId: Id,
    taskId: Id,
    reason: Text.optional(),
    propagate: z.enum(['none', 'children']).optional(),
  }),
  retryTask: z.object({ sessionId: Id, taskId: Id }),
  getTask: z.strictObject({ sessionId: Id, taskId: Id }),
  listTasks: z.strictObject({ sessionId: Id, archived: z.boolean().optional() }),
  setState: z.object({ sessionId: Id, threadId: Id.optional(), key: Text, value: z.unknown() }),
  // The limits' values are checked by the command (`invalid_limit`, naming the limit).
  changeLimits: z.object({ sessionId: Id, reason: Text.optional(), changedBy: Id.optional() }),
  getSession: z.object({
    sessionId: Id,
    cursor: Count.optional(),
    before: Count.optional(),
    limit: Count.optional(),
  }),
  getThreadRead: z.object({ sessionId: Id, threadId: Id }),
  artifact: z.object({ sessionId: Id, artifactId: Id }),
  snapshotAt: z.object({ sessionId: Id, at: Count }),
  onThread: OnThread,
  exportReview: z.strictObject({
    sessionId: Id,
    threadId: Id.optional(),
    turnId: Id.optional(),
    taskId: Id.optional(),
    format: z.enum(['json', 'markdown']).optional(),
  }),
  resumeThread: z.strictObject({ sessionId: Id, threadId: Id, resumeToken: Text.max(64).optional() }),
  startJob: StartJobInputSchema.extend({ binding: BindingUpdateSchema.optional() }),
  getJob: JobIdInputSchema,
  listJobs: ListJobsInputSchema,
  cancelJob: CancelJobInputSchema,
  retryJob: JobIdInputSchema,
  getState: z.object({ sessionId: Id, threadId: Id.optional(), key: Text.optional() }),
  sessionId: Id,
  optionalSessionId: Id.optional(),
  session: SessionOnly,
} as const;

export type ControlInput = keyof typeof CONTROL_INPUTS;

/** A task's definition as a body (the HTTP API's create and update bodies extend it). */
export const TaskDefinitionSchema = z.strictObject(TASK_DEFINITION);

/**
 * `input` if it has the shape of `kind`; otherwise an OarRuntimeError `invalid_input` (`invalid_binding` when the
 * binding is what is wrong) naming each problem with its path. Returns the input itself, unchanged.
 */
/** `run(input)` once `input` has the shape of `kind`: a bad one rejects (never throws synchronously). */
export function checkedCall<I, T>(
  method: string,
  kind: ControlInput,
  input: I,
  run: (input: I) => Promise<T>,
): Promise<T> {
  try {
    return run(checkInput(method, kind, input));
  } catch (error) {
    return Promise.reject(error);
  }
}

export function checkInput<T>(method: string, kind: ControlInput, input: T): T {
  const parsed = CONTROL_INPUTS[kind].safeParse(input);
  if (parsed.success) return input;
  const issues = parsed.error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
  const binding = parsed.error.issues.some((i) => i.path[0] === 'binding' || i.path[0] === 'update');
  const first = issues[0];
  throw new OarRuntimeError(
    binding ? 'invalid_binding' : 'invalid_input',
    `invalid input to ${method}${first ? `: ${first.path || 'the input'}: ${first.message}` : ''}`,
    { details: { method, issues } },
  );
}
