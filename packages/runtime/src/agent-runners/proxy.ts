import {
  AGENT_API_ERROR_CODES,
  AGENT_API_METHOD,
  AgentApiRequestSchema,
  PeerError,
  type RequestHandler,
  type RequestStream,
  toWireError,
} from '@oar/runner-sdk';
import { MAX_STORAGE_SET_PAYLOAD_BYTES } from '../store/runner-storage.js';
import {
  artifactRead,
  eventsCall,
  historyPage,
  historySearch,
  promptGet,
  stateCall,
  stateList,
} from './context-apis.js';
import { knowledgeRetrieve } from './knowledge.js';
import { modelCall, modelRerank } from './model-proxy.js';
import { requestPlatformAction } from './platform-actions.js';
import { type AuditTarget, apiError, type RunSession } from './run-session.js';
import { steeringPull } from './steering.js';
import { storageCall } from './storage.js';
import { tokensCount } from './token-count.js';
import { toolCall, toolDetail } from './tool-proxy.js';

/** The largest proxy request the host reads (its payload as JSON). */
export const MAX_API_PAYLOAD_BYTES = 256 * 1024;

type ApiHandler = (
  session: RunSession,
  payload: Record<string, unknown>,
  stream: RequestStream,
  audit: AuditTarget,
) => Promise<unknown>;

const HANDLERS: Record<string, ApiHandler> = {
  'models.invoke': (s, p, _st, a) => modelCall(s, p, undefined, a),
  'models.stream': (s, p, st, a) => modelCall(s, p, st, a),
  'models.rerank': (s, p, _st, a) => modelRerank(s, p, a),
  'tools.get_detail': (s, p, _st, a) => toolDetail(s, p, a),
  'tools.call': (s, p, st, a) => toolCall(s, p, a, st.signal),
  'knowledge.retrieve': (s, p, _st, a) => knowledgeRetrieve(s, p, a),
  'history.page': (s, p, _st, a) => historyPage(s, p, a),
  'history.search': (s, p, _st, a) => historySearch(s, p, a),
  'events.get': (s, p, _st, a) => eventsCall(s, p, a, 'get'),
  'events.page': (s, p, _st, a) => eventsCall(s, p, a, 'page'),
  'artifacts.metadata': (s, p, _st, a) => artifactRead(s, p, a, 'metadata'),
  'artifacts.read_range': (s, p, _st, a) => artifactRead(s, p, a, 'read'),
  'artifacts.open_stream': (s, p, st, a) => artifactRead(s, p, a, 'stream', st),
  'state.get': (s, p, _st, a) => stateCall(s, p, a, 'get'),
  'state.set': (s, p, _st, a) => stateCall(s, p, a, 'set'),
  'state.delete': (s, p, _st, a) => stateCall(s, p, a, 'delete'),
  'storage.get': (s, p, _st, a) => storageCall(s, p, a, 'get'),
  'storage.set': (s, p, _st, a) => storageCall(s, p, a, 'set'),
  'storage.delete': (s, p, _st, a) => storageCall(s, p, a, 'delete'),
  'storage.list': (s, p, _st, a) => storageCall(s, p, a, 'list'),
  'platform.request_action': (s, p, st, a) => requestPlatformAction(s, p, a, { signal: st.signal }),
  // OAR's additions (docs/runners.md "The per-run API proxy"): what LangBot's proxy has and the spec's list lacks.
  'state.list': (s, p, _st, a) => stateList(s, p, a),
  'steering.pull': (s, p, _st, a) => steeringPull(s, p, a),
  'prompt.get': (s, _p, _st, a) => promptGet(s, a),
  'tokens.count': (s, p, _st, a) => tokensCount(s, p, a),
};

/**
 * The per-run authorized API proxy: the handler of runner → host requests on the connection `session` was started
 * on. Every call is checked, in this order, against: the method and shape; the run (its `run_id` must be this
 * connection's run, and the run still active — identity comes from the connection, never from the message); the
 * deadline; the payload size; the rate limit; then the frozen access inside each action. Every call, allowed or
 * refused, is audited as a `run.status` (phase `runner_api`) with run_id, runner_id, action, resource, scope and
 * result. Errors carry exactly the spec's AgentAPIError codes.
 */
export function apiHandler(session: RunSession): RequestHandler {
  return async (method, params, stream) => {
    const raw = params as { run_id?: unknown; action?: unknown } | undefined;
    const action = typeof raw?.action === 'string' ? raw.action.slice(0, 64) : '';
    const claimed = typeof raw?.run_id === 'string' ? raw.run_id.slice(0, 128) : undefined;
    const target: AuditTarget = {};
    try {
      const result = await authorizedCall(session, method, params, claimed, action, stream, target);
      await audit(session, claimed, action, target, 'allowed');
      return result;
    } catch (error) {
      const wire = toWireError(error);
      // Only the spec's codes leave the host: anything else (a bug, a store fault) is a runtime_error.
      const code = (AGENT_API_ERROR_CODES as readonly string[]).includes(wire.code) ? wire.code : 'runtime_error';
      const answer = code === wire.code ? wire : { ...wire, code, details: { ...wire.details, cause: wire.code } };
      const refused = code !== 'runtime_error' && code !== 'deadline_exceeded' ? 'refused' : 'failed';
      await audit(session, claimed, action, target, refused, code).catch(() => undefined);
      throw new PeerError({ ...answer, message: session.engine.redactor.redactText(answer.message) });
    }
  };
}

async function authorizedCall(
  session: RunSession,
  method: string,
  params: unknown,
  claimed: string | undefined,
  action: string,
  stream: RequestStream,
  target: AuditTarget,
): Promise<unknown> {
  if (method !== AGENT_API_METHOD) throw apiError('not_found', `unknown method ${method.slice(0, 64)}`);
  const parsed = AgentApiRequestSchema.safeParse(params);
  if (!parsed.success) throw apiError('invalid_argument', 'an API request is {run_id, action, payload}');
  // The reference host lets a call without a run through unrestricted; OAR refuses it.
  if (claimed === undefined) throw apiError('unauthorized', 'the call carries no run_id');
  if (claimed !== session.ids.runId) {
    throw apiError('unauthorized', 'the run_id is not the run of this connection', { run_id: claimed });
  }
  if (!session.active) throw apiError('unauthorized', 'the run has ended', { run_id: claimed });
  if (Date.now() >= session.deadlineAt) throw apiError('deadline_exceeded', 'the run deadline has passed');
  // Every call of the run counts, refused ones included: a runner cannot flood the host with bad calls either.
  if (!session.admit()) {
    throw apiError('rate_limited', `more than ${session.access.callsPerMinute} calls in a minute`, {}, true);
  }
  const size = Buffer.byteLength(JSON.stringify(parsed.data.payload));
  // storage.set carries a value of up to 1 MiB (base64 for bytes); every other action's payload is small.
  const limit = action === 'storage.set' ? MAX_STORAGE_SET_PAYLOAD_BYTES : MAX_API_PAYLOAD_BYTES;
  if (size > limit) {
    throw apiError('payload_too_large', `the payload is ${size} bytes; the limit is ${limit}`, { limit });
  }
  const handler = HANDLERS[action];
  if (!handler) {
    throw apiError('invalid_argument', `unknown action ${action}`);
  }
  // The call ends at the run's deadline (or with the run), whatever the handler waits for.
  const remaining = session.deadlineAt - Date.now();
  const deadline = AbortSignal.timeout(Math.max(1, remaining));
  const call = handler(session, parsed.data.payload, stream, target);
  return await new Promise((resolve, reject) => {
    const onDeadline = () => reject(apiError('deadline_exceeded', `${action} passed the run deadline`));
    deadline.addEventListener('abort', onDeadline, { once: true });
    call.then(resolve, reject).finally(() => deadline.removeEventListener('abort', onDeadline));
  });
}

/** The audit event of one proxy call: ids and names only, never the payload. */
function audit(
  session: RunSession,
  claimed: string | undefined,
  action: string,
  target: AuditTarget,
  result: 'allowed' | 'refused' | 'failed',
  code?: string,
): Promise<void> {
  return session.record([
    {
      type: 'run.status',
      ...session.ids,
      payload: {
        phase: 'runner_api',
        title: `runner api ${action || '(none)'}: ${result}`,
        runner: {
          runId: claimed ?? null,
          runnerId: session.runnerId,
          action,
          resource: target.resource ?? null,
          scope: target.scope ?? null,
          result,
          ...(code ? { code } : {}),
        },
      },
    },
  ]);
}
