import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ACTION_STATUSES,
  AGGREGATE_STATUSES,
  type CatalogInput,
  EXECUTOR_TYPES,
  INTENTS,
  OarErrorSchema,
  type ParseOutcome,
  ParseOutcomeSchema,
  parseAssistantText,
  parseToolCall,
  parseTranscriptInput,
  REPLAY_MODES,
  RETURN_TO_MODEL,
  renderTranscript,
} from '../src/index.js';
import { readRepoJson } from './helpers.js';

const catalog = readRepoJson<CatalogInput>('examples/catalog.json');

/**
 * A fixed seed, so CI runs the same cases every time; fast-check prints the seed and the path of a failing case.
 * OAR_FUZZ_SEED=<n> explores other cases; OAR_FUZZ_RUNS=<n> scales the number of runs.
 */
const SEED = Number(process.env.OAR_FUZZ_SEED ?? 20_151_115);
const runs = (n: number) => ({
  seed: SEED,
  numRuns: Math.max(1, Math.round(n * Number(process.env.OAR_FUZZ_RUNS ?? 1))),
});

/** Every outcome is either a valid Declaration or structured errors, and never an internal failure. */
function wellFormed(outcome: ParseOutcome): void {
  expect(ParseOutcomeSchema.safeParse(outcome).success).toBe(true);
  if (outcome.ok) {
    expect(outcome.declaration).toBeDefined();
    expect(outcome.errors).toEqual([]);
  } else {
    expect(outcome.errors.length).toBeGreaterThan(0);
    for (const error of outcome.errors) expect(error.code).not.toBe('internal_error');
  }
}

// Values shaped like carrier arguments so the fuzzer reaches deep paths, not only the top-level type check.
const callArb = fc.record(
  {
    id: fc.oneof(fc.constantFrom('a', 'b', 'c', 'r1'), fc.string()),
    type: fc.oneof(fc.constantFrom('tool', 'agent'), fc.string()),
    name: fc.oneof(fc.constantFrom('read', 'glob', 'grep', 'auto', 'code-reviewer'), fc.string()),
    args: fc.oneof(fc.dictionary(fc.string(), fc.jsonValue()), fc.jsonValue()),
    depends: fc.oneof(fc.constantFrom('a', 'b', 'none', ''), fc.array(fc.constantFrom('a', 'b', 'c', 'none'))),
    result: fc.oneof(fc.constantFrom('summary', 'full', 'adaptive'), fc.string()),
  },
  { requiredKeys: [] },
);
const carrierArb = fc.record(
  {
    kind: fc.oneof(fc.constantFrom('act', 'answer', 'done'), fc.string()),
    message: fc.oneof(fc.string(), fc.jsonValue()),
    calls: fc.oneof(fc.array(fc.oneof(callArb, fc.string(), fc.jsonValue()), { maxLength: 6 }), fc.string()),
    answer: fc.string(),
    text: fc.string(),
  },
  { requiredKeys: [] },
);

describe('parsers never throw', () => {
  it('any JSON value through the tool carrier', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => wellFormed(parseToolCall(value, { catalog }))),
      runs(500),
    );
  });

  it('carrier-shaped values, raw, stringified and wrapped', () => {
    fc.assert(
      fc.property(carrierArb, fc.constantFrom('raw', 'string', 'wrapped', 'native'), (value, form) => {
        const input =
          form === 'raw'
            ? value
            : form === 'string'
              ? JSON.stringify(value)
              : form === 'wrapped'
                ? { input: JSON.stringify(value) }
                : { name: 'AgentProtocolOutput', arguments: JSON.stringify(value) };
        wellFormed(parseToolCall(input, { catalog, history: { completedActionIds: ['c'] } }));
      }),
      runs(1000),
    );
  });

  it('any string through both carriers', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 400 }), (text) => {
        wellFormed(parseAssistantText(text, { catalog }));
        wellFormed(parseToolCall(text, { catalog }));
      }),
      runs(500),
    );
  });

  it('text assembled from protocol fragments', () => {
    const fragment = fc.oneof(
      fc.constantFrom(
        '```json agent-protocol\n',
        '```json\n',
        '```\n',
        '~~~\n',
        '## user.visible\n',
        '## p\n',
        '<invoke name="read">',
        '<parameter name="filePath">',
        '</parameter>',
        '</invoke>',
        '<tool_call>',
        '</tool_call>',
        '[TOOL_CALL]',
        '[/TOOL_CALL]',
        '{"type": "agent.protocol", "version": "1", "intent": "execute", ',
        '"payload": {"type": "action_graph", "actions": [',
        '{"type": "action", "id": "a", "executor": {"type": "tool", "target": "read"}, "input": {"filePath": "x"}, "prompt_ref": "md:p"}',
        ']}}',
        '{"name": "read", "arguments": {"filePath": "a"}}',
        '\n',
      ),
      fc.string({ maxLength: 20 }),
    );
    fc.assert(
      fc.property(fc.array(fragment, { maxLength: 20 }), (parts) => {
        const text = parts.join('');
        wellFormed(parseAssistantText(text, { catalog }));
        wellFormed(parseAssistantText(text, { catalog, allowPlainText: true }));
      }),
      runs(1000),
    );
  });
});

// ----- the DSL: fenced agent-protocol blocks with Markdown sections -------------------------------------------

/** Mostly a valid value, sometimes anything: the fuzzer reaches deep paths and still tries the edges. */
const mostly = <T, U>(valid: fc.Arbitrary<T>, other: fc.Arbitrary<U>): fc.Arbitrary<T | U> =>
  fc.oneof({ arbitrary: valid, weight: 12 }, { arbitrary: other, weight: 1 });
const idArb = fc.oneof(fc.constantFrom('a', 'b', 'c', 'r1', 'x.y:z-1', '', ' ', '-a', 'a'.repeat(130)), fc.string());
const dslActionArb = fc.record(
  {
    type: mostly(fc.constant('action'), fc.string()),
    id: mostly(fc.constantFrom('a', 'b', 'c', 'd'), idArb),
    title: fc.string(),
    operation: fc.oneof(
      fc.constantFrom('summarize', 'merge', 'expand_ref', 'wait', 'checkpoint', 'ask_user'),
      fc.string(),
    ),
    executor: mostly(
      fc.oneof(
        {
          arbitrary: fc.record({ type: fc.constant('tool'), target: fc.constantFrom('read', 'glob', 'grep') }),
          weight: 4,
        },
        fc.record(
          {
            type: mostly(fc.constantFrom(...EXECUTOR_TYPES, 'auto'), fc.string()),
            target: mostly(fc.constantFrom('read', 'glob', 'grep', 'auto', 'code-reviewer', ''), fc.string()),
            capabilities: fc.array(fc.string(), { maxLength: 3 }),
          },
          { requiredKeys: [] },
        ),
      ),
      fc.jsonValue({ maxDepth: 2 }),
    ),
    input: mostly(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })), fc.jsonValue({ maxDepth: 2 })),
    depends_on: mostly(
      fc.array(fc.constantFrom('a', 'b', 'c', 'd'), { maxLength: 2 }),
      fc.array(idArb, { maxLength: 3 }),
    ),
    prompt_ref: fc.oneof(fc.constantFrom('md:p', 'md:task', 'md:', 'p'), fc.string()),
    context_refs: fc.array(fc.oneof(fc.constantFrom('md:p', 'artifact://x', 'runtime://threads/t'), fc.string()), {
      maxLength: 3,
    }),
    result_policy: mostly(
      fc.record(
        {
          return_to_model: mostly(fc.constantFrom(...RETURN_TO_MODEL), fc.string()),
          max_tokens: mostly(fc.integer({ min: 1, max: 5000 }), fc.oneof(fc.integer(), fc.double())),
          store_full: fc.boolean(),
        },
        { requiredKeys: ['return_to_model'] },
      ),
      fc.jsonValue({ maxDepth: 1 }),
    ),
    failure_policy: mostly(
      fc.oneof(
        fc.constantFrom('continue', 'abort', 'ask_model', 'ask-model', 'retry'),
        fc.record(
          {
            on_failure: fc.constantFrom('continue', 'abort', 'ask_model', 'ask-model'),
            max_attempts: fc.integer({ min: 1, max: 10 }),
          },
          { requiredKeys: [] },
        ),
      ),
      fc.oneof(
        fc.string(),
        fc.record({ on_failure: fc.string(), max_attempts: fc.integer({ min: -2, max: 20 }) }, { requiredKeys: [] }),
      ),
    ),
    persist: mostly(fc.boolean(), fc.jsonValue({ maxDepth: 0 })),
  },
  { requiredKeys: ['type', 'id', 'executor'] },
);
const executionArb = mostly(
  fc.record(
    { mode: fc.constantFrom('ephemeral', 'durable'), strategy: fc.constantFrom('dag', 'sequential', 'parallel') },
    { requiredKeys: [] },
  ),
  fc.oneof(
    fc.record({ mode: fc.string(), strategy: fc.string() }, { requiredKeys: [] }),
    fc.jsonValue({ maxDepth: 1 }),
  ),
);
const actionGraphArb = fc.record({
  type: fc.constant('action_graph'),
  actions: mostly(
    fc.uniqueArray(dslActionArb, { minLength: 1, maxLength: 4, selector: (a) => a.id }),
    fc.array(fc.oneof(dslActionArb, fc.jsonValue({ maxDepth: 2 })), { maxLength: 5 }),
  ),
});
const otherPayloadArb = fc.oneof(
  fc.record(
    {
      type: fc.constant('expand_ref'),
      refs: fc.array(fc.record({ ref: fc.string(), reason: fc.string() }, { requiredKeys: [] }), { maxLength: 3 }),
    },
    { requiredKeys: ['type'] },
  ),
  fc.record(
    {
      type: fc.constant('decision'),
      decision: fc.oneof(fc.constantFrom('retry', 'skip', 'abort', 'continue', 'replan'), fc.string()),
      action_ids: fc.array(idArb, { maxLength: 3 }),
    },
    { requiredKeys: ['type'] },
  ),
  fc.record(
    {
      type: fc.constant('final_report_spec'),
      sections: fc.array(fc.record({ id: fc.string(), title: fc.string() }, { requiredKeys: [] }), { maxLength: 3 }),
    },
    { requiredKeys: ['type'] },
  ),
  fc.jsonValue({ maxDepth: 2 }),
);
/** Mostly an action graph under an intent that takes one; otherwise any intent with any payload. */
const envelopeArb = fc
  .tuple(
    mostly(
      fc.tuple(fc.constantFrom('execute', 'plan', 'revise'), actionGraphArb),
      fc.tuple(fc.oneof(fc.constantFrom(...INTENTS), fc.string()), fc.oneof(actionGraphArb, otherPayloadArb)),
    ),
    fc.record(
      {
        type: mostly(fc.constant('agent.protocol'), fc.string()),
        version: mostly(fc.constant('1'), fc.oneof(fc.constantFrom(1, '2'), fc.string())),
        title: fc.string(),
        execution: executionArb,
        persist: mostly(fc.boolean(), fc.jsonValue({ maxDepth: 0 })),
      },
      { requiredKeys: ['type', 'version'] },
    ),
  )
  .map(([[intent, payload], rest]) => ({ ...rest, intent, payload }));
const fenceArb = mostly(fc.constant('```'), fc.constantFrom('````', '~~~', '``'));
const infoArb = mostly(
  fc.constant('json agent-protocol'),
  fc.constantFrom(' json agent-protocol', ' agent-protocol', 'json', '', 'JSON Agent-Protocol'),
);
const sectionArb = fc.tuple(
  fc.constantFrom('## p', '## task', '## user.visible', '# p', '### p', '## P', '##'),
  fc.string({ maxLength: 60 }),
);

describe('the DSL never throws', () => {
  it('any JSON value in an agent-protocol block', () => {
    fc.assert(
      fc.property(
        fc.jsonValue(),
        fc.string({ maxLength: 40 }),
        fc.string({ maxLength: 40 }),
        (value, before, after) => {
          const text = `${before}\n\`\`\`json agent-protocol\n${JSON.stringify(value)}\n\`\`\`\n${after}`;
          wellFormed(parseAssistantText(text, { catalog }));
          wellFormed(
            parseAssistantText(text, { catalog, allowPlainText: true, history: { completedActionIds: ['c'] } }),
          );
        },
      ),
      runs(200),
    );
  });

  it('envelope-shaped declarations with sections, fences and cut-offs', () => {
    fc.assert(
      fc.property(
        envelopeArb,
        fc.array(sectionArb, { maxLength: 4 }),
        fenceArb,
        infoArb,
        mostly(fc.constantFrom('close', 'pretty'), fc.constantFrom('open', 'other-close', 'twice', 'indented', 'cut')),
        fc.string({ maxLength: 40 }),
        (envelope, sections, fence, info, shape, prose) => {
          const json = shape === 'pretty' ? JSON.stringify(envelope, null, 2) : JSON.stringify(envelope);
          const body = shape === 'cut' ? json.slice(0, Math.floor(json.length / 2)) : json;
          const close = shape === 'open' ? '' : shape === 'other-close' ? '\n```\n' : `\n${fence}\n`;
          const block = `${fence}${info}\n${body}${close}`;
          const indented = shape === 'indented' ? block.replace(/^/gm, '   ') : block;
          const markdown = sections.map(([heading, text]) => `${heading}\n${text}\n`).join('\n');
          const text = `${prose}\n${indented}${shape === 'twice' ? `\n${indented}` : ''}\n${markdown}`;
          wellFormed(parseAssistantText(text, { catalog }));
          wellFormed(parseAssistantText(text, { catalog, allowPlainText: true }));
          // The same declaration through the tool carrier is refused or accepted, never a crash.
          wellFormed(parseToolCall(envelope, { catalog }));
        },
      ),
      runs(200),
    );
  });

  it('a valid action graph wrapped in random Markdown still parses the same', () => {
    const declaration = {
      type: 'agent.protocol',
      version: '1',
      intent: 'execute',
      payload: {
        type: 'action_graph',
        actions: [
          {
            type: 'action',
            id: 'a',
            executor: { type: 'tool', target: 'read' },
            input: { filePath: 'README.md' },
            prompt_ref: 'md:p',
          },
        ],
      },
    };
    const block = `\`\`\`json agent-protocol\n${JSON.stringify(declaration)}\n\`\`\`\n\n## p\nRead it.\n`;
    fc.assert(
      fc.property(
        fc.string({ maxLength: 80 }).filter((s) => !/[`~#<[]/.test(s)),
        fc.string({ maxLength: 80 }).filter((s) => !/[`~#<[]/.test(s)),
        (before, after) => {
          const outcome = parseAssistantText(`${before}\n\n${block}\n${after}`, { catalog });
          wellFormed(outcome);
          expect(outcome.ok, JSON.stringify(outcome.errors)).toBe(true);
          expect(outcome.declaration?.actions.map((a) => a.id)).toEqual(['a']);
        },
      ),
      runs(200),
    );
  });
});

// ----- transcripts: `oar protocol transcript` input ------------------------------------------------------------

const transcriptCallArb = fc.record(
  {
    action: fc.record(
      {
        id: fc.oneof(fc.constantFrom('a', 'b', ''), fc.string()),
        executor: fc.oneof(
          fc.record({ type: fc.constantFrom(...EXECUTOR_TYPES, 'x'), target: fc.string() }, { requiredKeys: [] }),
          fc.jsonValue({ maxDepth: 1 }),
        ),
        input: fc.oneof(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })), fc.jsonValue({ maxDepth: 1 })),
        dependsOn: fc.oneof(fc.string(), fc.array(fc.string(), { maxLength: 2 })),
        title: fc.string(),
      },
      { requiredKeys: ['id'] },
    ),
    result: fc.record(
      {
        id: fc.oneof(fc.constantFrom('a', 'b'), fc.string()),
        status: fc.oneof(fc.constantFrom(...ACTION_STATUSES), fc.string()),
        summary: fc.string(),
        content: fc.string({ maxLength: 300 }),
        artifacts: fc.array(fc.string(), { maxLength: 2 }),
        truncated: fc.boolean(),
        error: fc.record({ code: fc.string(), message: fc.string(), retryable: fc.boolean() }),
      },
      { requiredKeys: ['status'] },
    ),
  },
  { requiredKeys: ['result'] },
);
const transcriptTurnArb = fc.oneof(
  fc.record(
    { kind: fc.constant('user'), text: fc.string({ maxLength: 200 }), ref: fc.string() },
    { requiredKeys: ['kind', 'text'] },
  ),
  fc.record({ kind: fc.constant('answer'), text: fc.string({ maxLength: 200 }) }),
  fc.record(
    {
      kind: fc.constant('protocol'),
      index: fc.oneof(fc.integer({ min: -1, max: 20 }), fc.double()),
      runId: fc.oneof(fc.constant('run_1'), fc.string()),
      purpose: fc.string(),
      status: fc.oneof(fc.constantFrom(...AGGREGATE_STATUSES), fc.string()),
      calls: fc.array(fc.oneof(transcriptCallArb, fc.jsonValue({ maxDepth: 2 })), { maxLength: 4 }),
      declaration: fc.oneof(fc.string({ maxLength: 300 }), fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 }))),
    },
    { requiredKeys: ['kind', 'runId'] },
  ),
  fc.jsonValue({ maxDepth: 2 }),
);

describe('transcripts never throw', () => {
  it('random transcript input: a structured error, or a rendering in every mode and budget', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.array(transcriptTurnArb, { maxLength: 6 }),
          fc.record({ turns: fc.array(transcriptTurnArb, { maxLength: 6 }) }),
          fc.jsonValue(),
        ),
        fc.constantFrom(...REPLAY_MODES),
        fc.option(fc.integer({ min: 0, max: 2000 }), { nil: undefined }),
        fc.option(fc.integer({ min: 0, max: 6 }), { nil: undefined }),
        (input, mode, budgetTokens, recentTurns) => {
          const parsed = parseTranscriptInput(input);
          if (!parsed.ok) {
            expect(OarErrorSchema.safeParse(parsed.error).success).toBe(true);
            expect(parsed.error.code).toBe('invalid_transcript_input');
            return;
          }
          const rendered = renderTranscript(parsed.input, {
            mode,
            ...(budgetTokens !== undefined ? { budgetTokens } : {}),
            ...(recentTurns !== undefined ? { recentTurns } : {}),
          });
          expect(typeof rendered.text).toBe('string');
        },
      ),
      runs(200),
    );
  });
});
