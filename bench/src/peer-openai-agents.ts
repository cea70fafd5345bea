import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  Agent,
  type AgentOutputItem,
  type Model,
  type ModelRequest,
  type ModelResponse,
  Runner,
  type StreamEvent,
  setTracingDisabled,
  tool,
  Usage,
} from '@openai/agents';
import { z } from 'zod';
import {
  type BenchOutput,
  log,
  makeWorkspace,
  RUNS,
  STEPS,
  StepClock,
  type StepResult,
  stepPath,
  summarizeSteps,
} from './common.js';

/**
 * A custom `Model` with no latency: one `read` function call per step, then a final message — the same script as
 * OAR's. Its step is the number of function results in the request's input, so it is stateless like a provider.
 */
class ToolLoopModel implements Model {
  constructor(
    private readonly steps: number,
    private readonly clock: StepClock,
  ) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.clock.start();
    const input = Array.isArray(request.input) ? request.input : [];
    const step = input.filter((item) => item.type === 'function_call_result').length;
    const output: AgentOutputItem[] =
      step < this.steps
        ? [
            {
              type: 'function_call',
              callId: `call_${step}`,
              name: 'read',
              arguments: JSON.stringify({ filePath: stepPath(step) }),
              status: 'completed',
            },
          ]
        : [
            {
              type: 'message',
              role: 'assistant',
              status: 'completed',
              content: [{ type: 'output_text', text: `Read ${this.steps} files.` }],
            },
          ];
    const response: ModelResponse = {
      usage: new Usage({ requests: 1, inputTokens: 0, outputTokens: 0, totalTokens: 0 }),
      output,
      responseId: `resp_${step}`,
    };
    this.clock.end();
    return response;
  }

  // biome-ignore lint/correctness/useYield: the benchmark never streams
  async *getStreamedResponse(): AsyncIterable<StreamEvent> {
    throw new Error('streaming is not used by the benchmark');
  }
}

async function once(steps: number, workspace: string, runner: Runner): Promise<{ gaps: number[]; ms: number }> {
  const clock = new StepClock();
  const readTool = tool({
    name: 'read',
    description: 'Read a text file in the workspace.',
    parameters: z.object({ filePath: z.string() }),
    execute: async ({ filePath }) => readFile(join(workspace, filePath), 'utf8'),
  });
  const agent = new Agent({
    name: 'bench',
    instructions: 'Read the files you are asked to read, then answer.',
    model: new ToolLoopModel(steps, clock),
    tools: [readTool],
  });
  const started = performance.now();
  const result = await runner.run(agent, `Read the ${steps} notes one by one, then answer.`, {
    maxTurns: steps + 10,
  });
  const ms = performance.now() - started;
  if (result.finalOutput !== `Read ${steps} files.` || clock.calls !== steps + 1) {
    throw new Error(`OpenAI Agents run did not finish as scripted (${clock.calls} model calls)`);
  }
  return { gaps: clock.gaps(), ms };
}

export async function run(): Promise<BenchOutput> {
  setTracingDisabled(true);
  const workspace = makeWorkspace('oa');
  const runner = new Runner({ tracingDisabled: true });
  await once(20, workspace, runner);
  const gaps: number[][] = [];
  const times: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const out = await once(STEPS, workspace, runner);
    gaps.push(out.gaps);
    times.push(out.ms);
  }
  const result: StepResult = summarizeSteps(
    {
      system: 'OpenAI Agents SDK',
      store: 'in memory',
      durable: 'no (the run loop keeps state in memory)',
      steps: STEPS,
      note: 'Runner.run with a custom Model, tracing disabled',
    },
    gaps,
    times,
  );
  log(`OpenAI Agents SDK: p50 ${result.p50.toFixed(2)} ms, p99 ${result.p99.toFixed(2)} ms`);
  return { steps: [result] };
}
