import type { ProtocolOutput } from './carrier.js';
import {
  type Action,
  DEFAULT_FAILURE_POLICY,
  type Declaration,
  type FailurePolicy,
  REFERENCE_PATTERN,
  type ResultPolicy,
} from './declaration.js';
import type { DslAction, DslEnvelope } from './dsl.js';
import type { ProtocolIssue } from './errors.js';
import { pointer } from './errors.js';

/**
 * Normalization: every accepted form becomes one `Declaration`. The carrier mapping table of the spec:
 * act → execute, answer → respond, done → stop; calls[].type → executor.type, name → executor.target,
 * args → input, depends → dependsOn, result → resultPolicy.returnToModel.
 */

const CARRIER_INTENT = { act: 'execute', answer: 'respond', done: 'stop' } as const;

function toArray(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

/** Agent delegations carry their task text in args; the runtime hands it to the child as the prompt. */
function delegationPrompt(args: Record<string, unknown> | undefined): string | undefined {
  for (const key of ['prompt', 'task', 'description', 'instructions']) {
    const value = args?.[key];
    if (typeof value === 'string' && value.trim() !== '') return value;
  }
  return undefined;
}

export function normalizeCarrier(
  output: ProtocolOutput,
  source: Pick<Declaration['source'], 'carrier' | 'form' | 'recovered'>,
): Declaration {
  const actions: Action[] = (output.calls ?? []).map((call) => {
    const prompt = call.prompt ?? (call.type === 'agent' ? delegationPrompt(call.args) : undefined);
    return {
      id: call.id,
      ...(call.title !== undefined ? { title: call.title } : {}),
      executor: { type: call.type, target: call.name, capabilities: call.capabilities ?? [] },
      input: call.args ?? {},
      dependsOn: toArray(call.depends),
      contextRefs: call.context ?? [],
      ...(prompt !== undefined ? { prompt } : {}),
      resultPolicy: { returnToModel: call.result ?? 'summary', storeFull: true },
      failurePolicy: { ...DEFAULT_FAILURE_POLICY },
    };
  });
  return {
    intent: CARRIER_INTENT[output.kind],
    ...(output.message !== undefined ? { message: output.message } : {}),
    persist: false,
    execution: { mode: 'ephemeral', strategy: 'dag' },
    actions,
    source: { ...source },
  };
}

export interface DslNormalization {
  declaration?: Declaration;
  issues: ProtocolIssue[];
}

function failurePolicy(policy: DslAction['failure_policy']): FailurePolicy {
  if (policy === undefined) return { ...DEFAULT_FAILURE_POLICY };
  if (typeof policy === 'string') {
    if (policy === 'retry') return { onFailure: 'continue', maxAttempts: 2 };
    return { onFailure: policy === 'ask-model' ? 'ask_model' : policy, maxAttempts: 1 };
  }
  const onFailure = policy.on_failure === 'ask-model' ? 'ask_model' : (policy.on_failure ?? 'continue');
  return { onFailure, maxAttempts: policy.max_attempts ?? 1 };
}

function resultPolicy(policy: DslAction['result_policy']): ResultPolicy {
  if (policy === undefined) return { returnToModel: 'summary', storeFull: true };
  return {
    returnToModel: policy.return_to_model,
    ...(policy.priority ? { priority: policy.priority } : {}),
    ...(policy.max_tokens ? { maxTokens: policy.max_tokens } : {}),
    // Kept as the model asked: the runtime stores every full output anyway (its own record) and, when the model
    // asked for false, says so in the observation (shapeObservation).
    storeFull: policy.store_full ?? true,
    ...(policy.if_truncated
      ? { ifTruncated: policy.if_truncated === 'ask-model' ? 'ask_model' : policy.if_truncated }
      : {}),
  };
}

/**
 * Map a schema-valid DSL envelope to a Declaration, resolving `md:` references against the message's
 * Markdown sections before anything runs. Unresolvable references are errors, never silently dropped.
 */
export function normalizeDsl(
  envelope: DslEnvelope,
  sections: Map<string, string>,
  options: { knownActionIds?: ReadonlySet<string>; recovered?: boolean } = {},
): DslNormalization {
  const issues: ProtocolIssue[] = [];
  const payload = envelope.payload;
  const resolveMd = (ref: string, path: (string | number)[]): string | undefined => {
    const id = ref.slice('md:'.length).trim().toLowerCase();
    const text = sections.get(id);
    if (text === undefined) {
      issues.push({
        code: 'unresolved_reference',
        path: pointer(path),
        message: `reference "${ref}" names no Markdown section`,
        hint:
          sections.size > 0
            ? `Add a "## ${id}" section after the block, or use one of: ${[...sections.keys()].map((k) => `md:${k}`).join(', ')}.`
            : `Add a "## ${id}" section after the agent-protocol block, holding the text.`,
      });
    }
    return text;
  };

  const actions: Action[] = [];
  if (payload.type === 'action_graph') {
    payload.actions.forEach((dsl, index) => {
      const base = ['payload', 'actions', index];
      const dependsOn = dsl.depends_on ?? [];
      const context: string[] = [];
      const contextRefs: string[] = [];
      (dsl.context_refs ?? []).forEach((ref, k) => {
        const path = [...base, 'context_refs', k];
        if (!REFERENCE_PATTERN.test(ref)) {
          issues.push({
            code: 'invalid_reference',
            path: pointer(path),
            message: `"${ref}" is not a reference the runtime understands`,
            hint: 'Use md:<section>, action:<id>.summary, action:<id>.output, input:user.goal, runtime://… or artifact:<name>.',
          });
          return;
        }
        if (ref.startsWith('md:')) {
          const text = resolveMd(ref, path);
          if (text !== undefined) context.push(text);
          return;
        }
        // Whether an action: reference names a dependency or an earlier completed action is the validator's check
        // (checkReferences), so the carrier's refs get it too.
        contextRefs.push(ref);
      });
      let prompt: string | undefined;
      if (dsl.prompt_ref !== undefined) {
        const path = [...base, 'prompt_ref'];
        if (dsl.prompt_ref.startsWith('md:')) prompt = resolveMd(dsl.prompt_ref, path);
        else if (!REFERENCE_PATTERN.test(dsl.prompt_ref)) {
          issues.push({
            code: 'invalid_reference',
            path: pointer(path),
            message: `prompt_ref "${dsl.prompt_ref}" is not a reference the runtime understands`,
            hint: 'Point prompt_ref at a Markdown section: "md:<section id>", and add that "## <section id>" section.',
          });
        }
      }
      actions.push({
        id: dsl.id,
        ...(dsl.title !== undefined ? { title: dsl.title } : {}),
        ...(dsl.description !== undefined ? { description: dsl.description } : {}),
        ...(dsl.reason !== undefined ? { reason: dsl.reason } : {}),
        ...(dsl.operation !== undefined ? { operation: dsl.operation } : {}),
        executor: {
          type: dsl.executor.type,
          target: dsl.executor.target ?? 'auto',
          capabilities: dsl.executor.capabilities ?? [],
        },
        input: dsl.input ?? {},
        dependsOn,
        contextRefs,
        ...(context.length > 0 ? { context } : {}),
        ...(prompt !== undefined ? { prompt } : {}),
        ...(dsl.prompt_ref !== undefined ? { promptRef: dsl.prompt_ref } : {}),
        resultPolicy: resultPolicy(dsl.result_policy),
        failurePolicy: failurePolicy(dsl.failure_policy),
        ...(dsl.persist !== undefined ? { persist: dsl.persist } : {}),
      });
    });
  } else if (payload.type === 'expand_ref') {
    // expand_ref becomes runtime actions, so it goes through the same validation, logging and projection path.
    const used = new Set(options.knownActionIds ?? []);
    payload.refs.forEach((ref) => {
      let n = actions.length + 1;
      while (used.has(`expand_${n}`)) n++;
      const id = `expand_${n}`;
      used.add(id);
      actions.push({
        id,
        title: `Expand ${ref.ref}`,
        ...(ref.reason !== undefined ? { reason: ref.reason } : {}),
        operation: 'expand_ref',
        executor: { type: 'runtime', target: 'expand_ref', capabilities: [] },
        input: { ref: ref.ref, ...(ref.range ? { range: ref.range } : {}) },
        dependsOn: [],
        contextRefs: [],
        resultPolicy: { returnToModel: 'full', storeFull: true },
        failurePolicy: { ...DEFAULT_FAILURE_POLICY },
      });
    });
  }

  const userVisible = sections.get('user.visible');
  const persist = envelope.persist ?? false;
  const declaration: Declaration = {
    intent: envelope.intent,
    ...(envelope.title !== undefined ? { title: envelope.title } : {}),
    ...(userVisible !== undefined ? { userVisible, message: userVisible } : {}),
    persist,
    execution: {
      mode: envelope.execution?.mode ?? (persist ? 'durable' : 'ephemeral'),
      strategy: envelope.execution?.strategy ?? 'dag',
      ...(envelope.execution?.max_concurrency !== undefined
        ? { maxConcurrency: envelope.execution.max_concurrency }
        : {}),
    },
    ...(envelope.response_policy ? { responsePolicy: envelope.response_policy } : {}),
    actions,
    ...(payload.type === 'decision'
      ? {
          decision: {
            decision: payload.decision,
            ...(payload.run_id ? { runId: payload.run_id } : {}),
            ...(payload.action_ids ? { actionIds: payload.action_ids } : {}),
            ...(payload.reason ? { reason: payload.reason } : {}),
          },
        }
      : {}),
    ...(payload.type === 'final_report_spec'
      ? {
          reportSpec: {
            ...(payload.format ? { format: payload.format } : {}),
            sections: payload.sections.map((s) => ({ ...s })),
          },
        }
      : {}),
    source: {
      carrier: 'text',
      form: 'dsl',
      recovered: options.recovered ?? false,
      sections: Object.fromEntries(sections),
    },
  };
  return issues.length > 0 ? { issues } : { declaration, issues };
}
