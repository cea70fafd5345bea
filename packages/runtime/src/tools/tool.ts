import type { ResultPolicy, ToolAgentOutput } from '@oar/protocol';
import type { z } from 'zod';
import type { ToolError } from '../kernel/errors.js';
import type { Command } from '../kernel/match/command-match.js';

/**
 * A tool the runtime can execute. The flags are facts the scheduler and the permission policy rely on, so every
 * tool states them explicitly rather than inheriting optimistic defaults.
 */
export interface ToolDefinition<Input = Record<string, unknown>> {
  name: string;
  description: string;
  /** The input schema (zod); its JSON Schema is what the model sees in the catalog. */
  input: z.ZodType<Input>;
  /** Reads only: never changes the workspace or the world. */
  isReadOnly: boolean;
  /** May run in parallel with other concurrency-safe calls. Writes never are. */
  isConcurrencySafe: boolean;
  /** Deletes or overwrites something that cannot be recovered. */
  isDestructive: boolean;
  /** Running it twice has the effect of running it once: safe to re-run after a crash. */
  isIdempotent: boolean;
  /**
   * Not idempotent by itself, but the world deduplicates it by its idempotency key (`context.idempotencyKey`: a
   * service that honours an `Idempotency-Key`, a CLI that stores results by key). A call left in flight by a crash is
   * then retried with the same key instead of being recorded `lost`: exactly once, through the world's deduplication.
   */
  isIdempotentByKey?: boolean;
  /**
   * After a crash left a call of this tool in flight (recorded `lost`), ask the world whether it took effect — by the
   * call's idempotency key (an API's lookup by key, a store of results by key). Its answer ends the
   * action `completed` or `failed` (`not_happened`) with the evidence, with no person needed; `undefined` (or a
   * throw) means it cannot tell, and the action waits for a person (docs/reliability.md "Reconciling a lost action").
   */
  reconcile?: (
    call: { input: Input; idempotencyKey: string },
    context: ReconcileContext,
  ) => Promise<ReconcileVerdict | undefined>;
  /** On interrupt: `cancel` aborts it through the signal; `block` lets it finish (a half-done write is worse). */
  interruptBehavior: 'cancel' | 'block';
  /** Capability labels for `auto` selection and permission rules, e.g. ["filesystem", "read"]. */
  capabilities: string[];
  /**
   * Every file this tool touches is opened through the workspace's confined opens (tools/workspace.ts): what its
   * calls record as `sandbox.applied` (`profile: workspace`). Only a tool that really does set it: a claim of
   * confinement is an audit record.
   */
  confinedToWorkspace?: boolean;
  /** Per-call timeout; the runtime default applies when omitted. */
  timeoutMs?: number;
  /**
   * Workspace-relative paths a call touches, for path-glob permission rules. Computed lexically (no I/O) before the
   * call runs; the workspace root is passed so absolute paths inside it become relative too. A path that escapes
   * stays `..`-prefixed or absolute, so no workspace rule matches it (and execution denies it anyway).
   */
  paths?: (input: Input, workspaceRoot?: string) => string[];
  execute: (input: Input, context: ToolContext) => Promise<ToolOutput>;
  /**
   * The facts of one call, when they depend on its input (a business CLI's `calendar.read` reads, its
   * `calendar.delete` destroys): what it returns overrides the tool's flags for that call — in the permission
   * request, the scheduler's locking, the write-ahead rule and the interrupt. Given the parsed input.
   */
  factsOf?: (input: Input) => Partial<ToolFacts>;
  /**
   * The operation one call performs (a business CLI's `calendar.delete`): what permission rules' `operation`
   * condition and session grants match. Tools without operations leave it out.
   */
  operationOf?: (input: Input) => string | undefined;
  /**
   * The command one call runs (`exec`): what permission rules' `command` condition matches — an argv by its
   * prefix, a shell string only whole. Tools that run no command leave it out.
   */
  commandOf?: (input: Input) => Command | undefined;
  /**
   * Refuse a call before the permission gate and before anything starts (a business CLI's method that is not
   * whitelisted, or input that does not match the method's schema): nobody is asked to approve what could never run.
   */
  check?: (input: Input) => ToolError | undefined;
  /**
   * The result policy of this tool's calls when the declaration asks for none (the runtime default `summary`): a
   * tool whose output must reach the model whole (`full`) says so here. An explicit other policy still wins.
   */
  defaultResultPolicy?: ResultPolicy;
  /**
   * Documents on using this tool, by name (a business CLI's skill per module): disclosure only, never authority.
   * The description lists them; a runtime `read_skill` action loads one's text.
   */
  skills?: Record<string, { summary: string; text: string }>;
  /**
   * The operations this tool's calls may perform (`operationOf`'s values): a business CLI's effective whitelist.
   * Recorded with the catalog of every turn (`tool.catalog.resolved`), so the record says what a run could do.
   */
  operations?: readonly string[];
}

/** What a tool's `reconcile` step is given besides the call: where, and until when. */
export interface ReconcileContext {
  workspaceRoot: string;
  /** Aborted when the tool's timeout passes or the worker stops. */
  signal: AbortSignal;
}

/** A tool's answer to "did this lost call take effect?", with what it rests on (recorded with the answer). */
export interface ReconcileVerdict {
  happened: boolean;
  evidence?: Record<string, unknown>;
}

/** The flags of a tool that may differ per call (`factsOf`). */
export type ToolFacts = Pick<
  ToolDefinition,
  'isReadOnly' | 'isConcurrencySafe' | 'isDestructive' | 'isIdempotent' | 'isIdempotentByKey' | 'interruptBehavior'
>;

/**
 * The facts of one call of `tool` with `input`: its flags, overridden by `factsOf` when it has one. An input
 * `factsOf` cannot judge (it throws) keeps the tool's own flags, which must be the safe ones.
 */
export function callFacts<Input>(tool: ToolDefinition<Input>, input: Input): ToolFacts {
  const own: ToolFacts = {
    isReadOnly: tool.isReadOnly,
    isConcurrencySafe: tool.isConcurrencySafe,
    isDestructive: tool.isDestructive,
    isIdempotent: tool.isIdempotent,
    ...(tool.isIdempotentByKey ? { isIdempotentByKey: true } : {}),
    interruptBehavior: tool.interruptBehavior,
  };
  if (!tool.factsOf) return own;
  try {
    return { ...own, ...tool.factsOf(input) };
  } catch {
    return own;
  }
}

export interface ToolContext {
  /** Absolute, real path of the workspace root every file tool is confined to. */
  workspaceRoot: string;
  /** Aborted on interrupt (for `cancel` tools) or timeout. */
  signal: AbortSignal;
  /**
   * The permission policy's verdict on one workspace-relative path for this call. Tools that discover files
   * themselves (glob, grep) skip what it refuses, so a path rule cannot be bypassed by searching instead of reading.
   */
  mayAccess?: (relativePath: string) => boolean;
  /** Progress for the UI (becomes `tool.progress`); never shown to the model. */
  progress: (message: string, data?: Record<string, unknown>) => void;
  /**
   * Who and what the call is for: the session's authority, for tools that act on its behalf (a business CLI). Read
   * on demand (it costs a read of the session), so tools that do not need it pay nothing.
   */
  caller?: () => Promise<ToolCallInfo>;
  /**
   * For tools that run processes (`exec`): record facts about the call's own work, publish its live output, store
   * artifacts. Provided for tool actions; absent elsewhere (a tool must then run without it or refuse).
   */
  recorder?: ToolRecorder;
  /**
   * The call's idempotency key (recorded in its `tool.started`): the same for the same attempt of this call, a new one
   * for a new attempt. A tool that acts on the world hands it on, so the world can refuse to do a thing twice:
   * `exec` and a business CLI get `OAR_IDEMPOTENCY_KEY`, an MCP call `_meta["oar/idempotencyKey"]`.
   */
  idempotencyKey?: string;
}

/** The standard events a tool may record about its own work (process and sandbox facts, warnings). */
export type ToolFactType =
  | 'process.started'
  | 'process.input'
  | 'process.completed'
  | 'process.failed'
  | 'process.terminated'
  | 'sandbox.applied'
  | 'sandbox.violation'
  | 'output.truncated'
  | 'runtime.warning';

/** One fact a tool records: carries the call's ids; redacted like every event. */
export interface ToolFact {
  type: ToolFactType;
  processId?: string;
  payload: Record<string, unknown>;
}

/** What `ToolContext.recorder` offers: durable facts, live-only output, artifacts — all of the running call. */
export interface ToolRecorder {
  /**
   * Aborted when the call's turn is interrupted, the worker loses the thread or the runtime closes — and, unlike
   * `ToolContext.signal`, still after the call returned: what a call leaves running (a background process) stops
   * with it.
   */
  readonly turnSignal: AbortSignal;
  /** The runtime the call runs in: what it leaves running is stopped when that runtime closes. */
  readonly owner: string;
  /** Record facts now (durably: in the store when it returns), with the call's ids. */
  facts(facts: ToolFact[]): Promise<void>;
  /** Live-only output (`process.output`): handed to the session's subscribers now, never stored. */
  live(output: { processId: string; stream: 'stdout' | 'stderr'; delta: string }): void;
  /** Store content as an artifact of the session (redacted) with its `artifact.changed` fact; returns its ref. */
  artifact(content: {
    name: string;
    mime: string;
    text?: string;
    bytes?: Uint8Array;
  }): Promise<{ artifactId: string; uri: string; size: number }>;
}

/** The call a tool runs for. */
export interface ToolCallInfo {
  sessionId: string;
  /** The thread the call runs in (a background process belongs to it). */
  threadId: string;
  turnId: string;
  runId: string;
  toolCallId: string;
  /** The session's workspace (`default` in embedded use). */
  workspaceId: string;
  /** Who the session acts for: `api_key:<id>` behind the server, `user:<name>` for the local user. */
  actor: string;
}

/** What a tool returns. The full output is stored as an artifact; the model sees what the result policy allows. */
export interface ToolOutput {
  /** The full textual output. */
  text?: string;
  /** Structured fields (counts, file lists, exit codes) for `structured` result policies and summaries. */
  structured?: Record<string, unknown>;
  /** A tool-native one-line summary, preferred over a mechanical one. */
  summary?: string;
  /** MIME type of `text` (default text/plain). */
  mime?: string;
  /** The Agent Tool Protocol's canonical record of the call (a business CLI): on `tool.result` and an artifact. */
  agentOutput?: ToolAgentOutput;
  /**
   * What the model sees of the output under the `summary` result policy, when a mechanical summary (which is the
   * text itself for a short output) would lose what matters: a command's exit status with the head and tail of its
   * output. Other policies still see `text`.
   */
  view?: string;
  /**
   * Set when `view` is a cut of a larger output (a command's head and tail): the full output is stored and an
   * `output.spilled` fact names its ref, as for an observation over the context budget. The text says why.
   */
  spilled?: string;
  /**
   * The tool ran to its end but reports a failure of what it ran (a command's non-zero exit): recorded as
   * `tool.result` `isError: true`, so people see it failed; the model sees the output and its status line.
   */
  isError?: boolean;
  /**
   * The workspace file this call changed (`write`, `edit`), with its content before the change: the runtime keeps
   * it as a version of the file (an artifact), so a rollback can restore it and a review can diff it. `before` is
   * absent when the call created the file; `after` is what the file holds now, to tell later whether anything else
   * changed it since.
   */
  fileVersion?: FileVersionOutput;
}

/** What a file-changing tool reports of the change (ToolOutput.fileVersion). */
export interface FileVersionOutput {
  /** Workspace-relative path. */
  path: string;
  /** The exact bytes before the change; absent when the call created the file (or kept only as `beforeDigest`). */
  before?: Uint8Array;
  /** What was before, when it was too large to keep (MAX_BEFORE_IMAGE_BYTES): its digest only. */
  beforeDigest?: { sha256: string; size: number };
  after: { sha256: string; size: number };
}

/** Identity helper that keeps the input type inferred from the zod schema. */
export function defineTool<Input>(definition: ToolDefinition<Input>): ToolDefinition<Input> {
  return definition;
}

// biome-ignore lint/suspicious/noExplicitAny: a registry holds tools of many input types
export type AnyTool = ToolDefinition<any>;
