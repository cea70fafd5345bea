import { type OarError, type RuntimeEvent, uiSchemaOfToolAgentOutput, uiSchemaText } from '@oar/protocol';

/**
 * One line of live progress per interesting event, for people watching `oar run` / `oar demo`. The full record
 * is always the event log (`--json` prints it as NDJSON); this is a view, so it may skip events.
 */

type Payload = Record<string, unknown>;
const color = (code: number) => (text: string) => (process.stdout.isTTY ? `\u001b[${code}m${text}\u001b[0m` : text);
const dim = color(2);
const green = color(32);
const red = color(31);
const yellow = color(33);
const cyan = color(36);

function short(value: unknown, max = 80): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  const line = (text ?? '').replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** `omitMessage`: the declaration's message was already printed as it streamed. */
export function renderEvent(
  event: RuntimeEvent,
  agents: Map<string, string>,
  options: { omitMessage?: boolean } = {},
): string | undefined {
  const p = (event.payload ?? {}) as Payload;
  const who = event.threadId ? (agents.get(event.threadId) ?? 'main') : 'main';
  const tag = who === 'main' ? '' : `${cyan(`[${who}]`)} `;
  switch (event.type) {
    case 'thread.started':
      if (event.threadId) agents.set(event.threadId, String(p.agent ?? 'main'));
      return undefined;
    case 'turn.started':
      return `${tag}${dim('turn started')}`;
    case 'model.requested':
      if (p.purpose === 'compaction')
        return `${tag}${dim(`model ${p.provider}/${p.modelId} summarising earlier turns`)}`;
      // `attempt` counts the tries of one call (provider retries), not the turn's steps: shown only for a retry.
      return `${tag}${dim(`model ${p.provider}/${p.modelId}${Number(p.attempt) > 1 ? ` attempt ${p.attempt}` : ''}${p.corrective ? ' (corrective retry)' : ''}`)}`;
    case 'context.compaction.completed':
      return `${tag}${dim(`context compacted: ${(p.affectedTurns as unknown[] | undefined)?.length ?? 0} turn(s), ${p.tokensBefore} → ${p.tokensAfter} tokens (${p.summarySource} summary, ${p.summaryRef})`)}`;
    case 'context.compaction.failed':
      return `${tag}${yellow('⚠')} context compaction failed: ${(p.error as OarError | undefined)?.message ?? 'unknown'}`;
    case 'run.status': {
      if (p.phase === 'declared') {
        const declaration = p.declaration as {
          actions: { id: string; executor: { type: string; target: string } }[];
          message?: string;
        };
        const lines = [
          `${tag}${declaration.message && !options.omitMessage ? `${declaration.message} ` : ''}${dim(`(${declaration.actions.length} action(s)${p.recovered ? ', recovered' : ''})`)}`,
        ];
        for (const a of declaration.actions) lines.push(`${tag}  • ${a.id} → ${a.executor.type}:${a.executor.target}`);
        return lines.join('\n');
      }
      if (p.phase === 'action' && typeof p.status === 'string' && p.status !== 'pending') {
        const obs = p.observation as { summary?: string; error?: OarError } | undefined;
        // A completed action whose command exited non-zero (its structured exit code) failed, as on tool.result.
        const exit = failedExit(obs);
        const mark = p.status === 'completed' && exit === undefined ? green('✓') : red('✗');
        const status = exit === undefined ? p.status : `failed (${exit})`;
        return `${tag}  ${mark} ${p.graphActionId} ${status}${obs?.error ? `: ${obs.error.message}` : obs?.summary ? ` — ${short(obs.summary)}` : ''}`;
      }
      return undefined;
    }
    case 'tool.started':
      return `${tag}  ${dim('…')} ${p.graphActionId ?? (p.runner ? 'runner' : p.toolCallId)} ${p.toolName}`;
    case 'tool.result': {
      // A command that ran to its end with a non-zero exit (isError) failed: ✗, and the summary leads with its
      // exit status ("exit 1, …"), never ✓.
      const failed = p.isError === true;
      return withUi(
        `${tag}  ${failed ? red('✗') : green('✓')} ${p.graphActionId ?? (p.runner ? 'runner' : p.toolCallId)} ${p.toolName}${failed ? red(' failed') : ''}${p.truncated ? yellow(' (spilled to artifact)') : ''} — ${short(p.summary)}`,
        p,
        tag,
      );
    }
    case 'tool.failed': {
      const error = p.error as OarError;
      return withUi(
        `${tag}  ${red('✗')} ${p.graphActionId ?? (p.runner ? 'runner' : p.toolCallId)} ${p.toolName}: ${error.code} ${short(error.message)}`,
        p,
        tag,
      );
    }
    case 'output.spilled':
      return `${tag}  ${yellow('↧')} output of ${p.sizeBytes} bytes stored as ${p.uri}; the model sees a preview`;
    // The exec tool (docs/commands.md): what the sandbox refused, a command run without it, a process lost.
    case 'sandbox.violation':
      return `${tag}  ${red('⛔')} sandbox: ${p.message}${p.evidence ? ` — ${short(p.evidence)}` : ''}`;
    case 'sandbox.applied':
      return p.profile === 'none'
        ? `${tag}  ${yellow('⚠')} ${p.command} runs without a sandbox: ${p.reason}`
        : undefined;
    case 'process.failed':
      return p.reason === 'lost'
        ? `${tag}  ${red('✗')} process ${p.processId} lost with the runtime that ran it`
        : undefined;
    case 'subagent.spawned':
      return `${tag}  ${cyan('↳')} delegated to ${p.agentName} (${p.childThreadId})`;
    case 'subagent.completed':
      return `${tag}  ${green('↲')} sub-agent finished — ${short(p.summary)}`;
    case 'subagent.failed':
      return `${tag}  ${red('↲')} sub-agent failed: ${(p.error as OarError).message}`;
    case 'action.required':
      return `${tag}${yellow('?')} ${p.prompt} ${dim(`(decision ${event.actionId})`)}`;
    case 'action.resolved':
      return `${tag}${p.decision === 'deny' ? red('✗') : green('✓')} decision ${p.decision}${p.reason ? `: ${p.reason}` : ''}`;
    case 'permission.evaluated':
      return p.decision === 'deny' ? `${tag}  ${red('⛔')} ${p.reason}` : undefined;
    case 'runtime.warning':
      return `${tag}${yellow('⚠')} ${p.message}`;
    case 'runtime.error':
      return `${tag}${red('✗')} ${p.message}`;
    case 'turn.completed':
      return `${tag}${green('turn completed')}${p.outcome && p.outcome !== 'answered' ? ` (${p.outcome})` : ''}`;
    case 'turn.failed': {
      const error = p.error as OarError;
      return `${tag}${red(`turn ${event.status === 'cancelled' ? 'cancelled' : 'failed'}`)}: ${error.code} — ${short(error.message, 200)}`;
    }
    default:
      return undefined;
  }
}

/** `exit N` (or `killed by SIGNAL`) of an observation whose command did not exit 0; undefined otherwise. */
function failedExit(observation: unknown): string | undefined {
  const structured = (observation as { structured?: { exitCode?: unknown; signal?: unknown } } | undefined)?.structured;
  if (typeof structured?.exitCode === 'number')
    return structured.exitCode === 0 ? undefined : `exit ${structured.exitCode}`;
  if (structured?.exitCode === null && typeof structured.signal === 'string') return `killed by ${structured.signal}`;
  return undefined;
}

/** A business tool's call ends with its UI (its ToolAgentOutput's hints compiled to ui_schema) as plain text. */
function withUi(line: string, p: Payload, tag: string): string {
  const ui = uiSchemaOfToolAgentOutput(p.toolAgentOutput);
  if (!ui) return line;
  const body = uiSchemaText(ui)
    .split('\n')
    .map((text) => `${tag}      ${text}`)
    .join('\n');
  return `${line}\n${body}`;
}
