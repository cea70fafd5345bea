import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage, HumanMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { tool } from '@langchain/core/tools';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode, toolsCondition } from '@langchain/langgraph/prebuilt';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
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
  tempDir,
} from './common.js';

/**
 * A fake chat model with no latency that emits one `read` tool call per step and then a final answer — the same
 * script as OAR's. (`FakeListChatModel` only emits text and `FakeStreamingChatModel` repeats its first response,
 * so neither can drive a multi-step tool loop.) Its step is the number of tool results already in the history, so
 * the model is stateless like a real provider. Each call is timed on the clock.
 */
class ToolLoopChatModel extends BaseChatModel {
  constructor(
    private readonly steps: number,
    private readonly clock: StepClock,
  ) {
    super({});
  }

  _llmType(): string {
    return 'bench-tool-loop';
  }

  // Tools are already known to the script; binding them changes nothing (a real model would get their schemas).
  override bindTools(): this {
    return this;
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    this.clock.start();
    const step = messages.filter((m) => m.getType() === 'tool').length;
    const message =
      step < this.steps
        ? new AIMessage({
            content: '',
            tool_calls: [{ id: `call_${step}`, name: 'read', args: { filePath: stepPath(step) }, type: 'tool_call' }],
          })
        : new AIMessage(`Read ${this.steps} files.`);
    this.clock.end();
    return { generations: [{ text: typeof message.content === 'string' ? message.content : '', message }] };
  }
}

function buildGraph(model: ToolLoopChatModel, workspace: string, checkpointer: SqliteSaver) {
  const readTool = tool(async ({ filePath }: { filePath: string }) => readFile(join(workspace, filePath), 'utf8'), {
    name: 'read',
    description: 'Read a text file in the workspace.',
    schema: z.object({ filePath: z.string() }),
  });
  const agent = async (state: typeof MessagesAnnotation.State) => ({ messages: [await model.invoke(state.messages)] });
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', agent)
    .addNode('tools', new ToolNode([readTool]))
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', toolsCondition, ['tools', END])
    .addEdge('tools', 'agent')
    .compile({ checkpointer });
}

type Durability = 'sync' | 'async';

async function once(
  steps: number,
  threadId: string,
  workspace: string,
  checkpointer: SqliteSaver,
  durability: Durability,
): Promise<{ gaps: number[]; ms: number }> {
  const clock = new StepClock();
  const graph = buildGraph(new ToolLoopChatModel(steps, clock), workspace, checkpointer);
  const started = performance.now();
  const result = await graph.invoke(
    { messages: [new HumanMessage(`Read the ${steps} notes one by one, then answer.`)] },
    { configurable: { thread_id: threadId }, recursionLimit: 2 * steps + 10, durability },
  );
  const ms = performance.now() - started;
  const last = result.messages.at(-1);
  if (last?.getType() !== 'ai' || clock.calls !== steps + 1) {
    throw new Error(`LangGraph run did not finish as scripted (${clock.calls} model calls)`);
  }
  return { gaps: clock.gaps(), ms };
}

export async function run(): Promise<BenchOutput> {
  const workspace = makeWorkspace('lg');
  const path = join(tempDir('lg'), 'checkpoints.db');
  const checkpointer = SqliteSaver.fromConnString(path);
  const steps: StepResult[] = [];
  for (const durability of ['sync', 'async'] as const) {
    await once(20, `warmup-${durability}`, workspace, checkpointer, durability);
    const gaps: number[][] = [];
    const times: number[] = [];
    for (let r = 0; r < RUNS; r++) {
      const out = await once(STEPS, `bench-${durability}-${r}`, workspace, checkpointer, durability);
      gaps.push(out.gaps);
      times.push(out.ms);
    }
    const db = checkpointer.db;
    const count = (table: string) =>
      (
        db.prepare(`select count(*) as n from ${table} where thread_id = ?`).get(`bench-${durability}-0`) as {
          n: number;
        }
      ).n;
    const synchronous = db.pragma('synchronous', { simple: true });
    const result = summarizeSteps(
      {
        system: `LangGraph ${durability === 'sync' ? '' : '(default) '}durability=${durability}`,
        store: 'SQLite (SqliteSaver, WAL)',
        durable: 'checkpoint per super-step (2 per step)',
        steps: STEPS,
        records: count('checkpoints') + count('writes'),
        recordsLabel: 'checkpoint + write rows',
        note: `StateGraph(MessagesAnnotation) agent ⇄ ToolNode; SQLite synchronous=${synchronous}`,
      },
      gaps,
      times,
    );
    log(`LangGraph durability=${durability}: p50 ${result.p50.toFixed(2)} ms, p99 ${result.p99.toFixed(2)} ms`);
    steps.push(result);
  }
  checkpointer.db.close();
  return { steps };
}
