import {
  AGENT_API_METHOD,
  Peer,
  PeerError,
  type PeerLimits,
  type RequestHandler,
  type RequestStream,
  type WireError,
  wireError,
} from '@oar/runner-sdk';
import { z } from 'zod';
import type { LangbotConnection, LangbotRequestStream } from './connection.js';
import { langbotRunContext } from './context.js';
import type { Handshake } from './handshake.js';
import { type ManifestNote, runnersOfContainer } from './manifest.js';
import {
  answerLangbotAction,
  isLangbotProxyAction,
  type LangbotHostApi,
  type LangbotRunInfo,
  NOT_SUPPORTED,
} from './proxy-actions.js';
import { DeltaText, oarRunResult } from './results.js';

/** LangBot's liveness actions: answered here, never forwarded. */
const LIVENESS = new Set(['__ping', '__heartbeat']);

const RunAgentParams = z.looseObject({
  runner_id: z.string(),
  runner_name: z.string(),
  context: z.looseObject({ run_id: z.string() }),
});

/**
 * The OAR runner side of a LangBot plugin: an OAR-wire peer, paired in this process with the host's (as an
 * in-process runner is), that answers the host's LIST_AGENT_RUNNERS / RUN_AGENT / CANCEL_AGENT_RUN by talking
 * LangBot frames to the plugin, and turns the plugin's proxy actions into AGENT_API requests to the host. The host
 * therefore sees an ordinary runner: its per-run authorization, budgets, facts and records apply unchanged.
 */
export class LangbotTranslator {
  /** The OAR peer playing the runner (its lines go to the host's peer). */
  readonly peer: Peer;
  /** The runs this connection is running: the only run ids its proxy calls may name. */
  private readonly runs = new Map<string, LangbotRunInfo>();
  /** Notes about the plugin's manifests, from its listing. */
  notes: ManifestNote[] = [];

  constructor(
    private readonly plugin: LangbotConnection,
    private readonly handshake: Handshake,
    writeToHost: (line: string) => void,
    limits: Partial<PeerLimits> | undefined,
    onFault: (error: WireError) => void,
  ) {
    this.peer = new Peer(writeToHost, this.fromHost, limits, onFault);
  }

  /** Host → runner requests on OAR's wire. */
  private readonly fromHost: RequestHandler = async (method, params, stream) => {
    switch (method) {
      case 'LIST_AGENT_RUNNERS': {
        const container = await this.handshake.done;
        const { runners, notes } = runnersOfContainer(container);
        this.notes = notes;
        return { runners };
      }
      case 'RUN_AGENT':
        return this.run(params, stream);
      case 'CANCEL_AGENT_RUN':
        // LangBot's wire has no cancel frame: the run ends when the host closes the connection (after its grace).
        return { cancelled: false, reason: 'the LangBot wire has no cancel; the connection is closed instead' };
      default:
        throw new PeerError(wireError('not_found', `method ${method} is not served by a LangBot plugin`));
    }
  };

  private async run(params: unknown, stream: RequestStream): Promise<null> {
    const parsed = RunAgentParams.safeParse(params);
    if (!parsed.success)
      throw new PeerError(wireError('invalid_argument', 'RUN_AGENT without runner_name and context'));
    const container = await this.handshake.done;
    const { runner_name: runnerName, context } = parsed.data;
    // The manifest as listed (read liberally): its `steering` and its operations shape the LangBot context's flags.
    const manifest = runnersOfContainer(container).runners.find((r) => (r as { name?: unknown }).name === runnerName) as
      | { capabilities?: Record<string, unknown>; permissions?: Record<string, unknown> }
      | undefined;
    this.runs.set(context.run_id, runInfo(parsed.data.runner_id, context));
    const deltas = new DeltaText();
    try {
      await this.plugin.stream(
        'run_agent',
        { runner_name: runnerName, context: langbotRunContext(context, manifest) },
        async (data) => {
          const result = oarRunResult(data, deltas);
          if (result !== undefined) await stream.send(result);
        },
        { signal: stream.signal },
      );
      return null;
    } finally {
      this.runs.delete(context.run_id);
    }
  }

  /** Runner → host requests on LangBot's wire: the handshake, liveness, and proxy actions. */
  readonly fromPlugin = async (
    action: string,
    data: Record<string, unknown>,
    stream: LangbotRequestStream,
  ): Promise<Record<string, unknown> | undefined> => {
    if (action === 'register_plugin') return this.handshake.register(data);
    if (LIVENESS.has(action)) return {};
    if (!isLangbotProxyAction(action)) {
      // LangBot's pipeline and platform actions (reply_message, get_bots …) have no run to answer for on OAR.
      throw new PeerError(
        wireError(NOT_SUPPORTED, `action ${action.slice(0, 64)} is not served by OAR's LangBot host`, {
          action: action.slice(0, 64),
        }),
      );
    }
    const run = this.runOf(data);
    const runId = run.runId;
    const host: LangbotHostApi = {
      call: (oarAction, payload, onChunk) =>
        this.peer.request(
          AGENT_API_METHOD,
          { run_id: runId, action: oarAction, payload },
          { ...(onChunk ? { onChunk } : {}), signal: stream.signal },
        ),
    };
    return answerLangbotAction(action, data, host, run, (chunk) => stream.send(chunk));
  };

  /**
   * The run a proxy call belongs to: the `run_id` it names, which must be a run of this connection (another run's id
   * is refused, whoever runs it). LangBot's plugin-scoped actions (storage) name none: they belong to the one run in
   * flight, if there is exactly one.
   */
  private runOf(data: Record<string, unknown>): LangbotRunInfo {
    const named = data.run_id;
    if (named === undefined || named === null) {
      const only = this.runs.size === 1 ? [...this.runs.values()][0] : undefined;
      if (only) return only;
      throw new PeerError(wireError('unauthorized', 'the call names no run_id and no single run is in flight'));
    }
    const run = typeof named === 'string' ? this.runs.get(named) : undefined;
    if (!run) {
      throw new PeerError(
        wireError('unauthorized', 'the run_id is not a run of this connection', {
          run_id: String(named).slice(0, 64),
        }),
      );
    }
    return run;
  }
}

/** What the proxy actions know of a run, from its OAR run context (frozen when it started). */
function runInfo(runnerId: string, context: Record<string, unknown>): LangbotRunInfo {
  const field = (value: unknown, key: string): unknown =>
    value && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
  const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
  const models = field(context.resources, 'models');
  const conversationId =
    text(field(context.conversation, 'conversation_id')) ?? text(field(context.conversation, 'thread_id'));
  const turnId = text(field(context.metadata, 'turn_id'));
  const workspaceId = text(field(context.conversation, 'workspace_id'));
  const deadline = field(context.runtime, 'deadline_at');
  return {
    runId: context.run_id as string,
    runnerId,
    models: Array.isArray(models) ? models.map((m) => text(field(m, 'model_id'))).filter((m) => m !== undefined) : [],
    startedAt: Date.now(),
    ...(conversationId ? { conversationId } : {}),
    ...(turnId ? { turnId } : {}),
    ...(workspaceId ? { workspaceId } : {}),
    ...(typeof deadline === 'number' ? { deadlineAt: Math.round(deadline * 1000) } : {}),
  };
}
