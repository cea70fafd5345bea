import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage, HumanMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { tool } from '@langchain/core/tools';
import { type BaseCheckpointSaver, END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode, toolsCondition } from '@langchain/langgraph/prebuilt';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import pg from 'pg';
import { z } from 'zod';
import {
  type BenchOutput,
  log,
  makeWorkspace,
  POSTGRES_URL,
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

function buildGraph(model: ToolLoopChatModel, workspace: string, checkpointer: BaseCheckpointSaver) {
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
  checkpointer: BaseCheckpointSaver,
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

/** A checkpointer on a fresh store, with what the report needs to know about it. */
interface Checkpointer {
  saver: BaseCheckpointSaver;
  store: string;
  /** Checkpoint and write rows a thread left behind. */
  records(threadId: string): Promise<number>;
  /** Store settings and extra rows, for the report's note on a thread's row. */
  note(threadId: string): Promise<string>;
  version?: Record<string, string>;
  /** Close it and remove what the benchmark created. */
  dispose(): Promise<void>;
}

/** SqliteSaver on a temp file (better-sqlite3, WAL). */
function openSqliteSaver(): Checkpointer {
  const saver = SqliteSaver.fromConnString(join(tempDir('lg'), 'checkpoints.db'));
  const count = (table: string, threadId: string) =>
    (saver.db.prepare(`select count(*) as n from ${table} where thread_id = ?`).get(threadId) as { n: number }).n;
  return {
    saver,
    store: 'SQLite (SqliteSaver, WAL)',
    records: async (threadId) => count('checkpoints', threadId) + count('writes', threadId),
    note: async () => `SQLite synchronous=${saver.db.pragma('synchronous', { simple: true })}`,
    version: { SQLite: String((saver.db.prepare('select sqlite_version() as v').get() as { v: string }).v) },
    async dispose() {
      saver.db.close();
    },
  };
}

/** PostgresSaver in a fresh schema on the benchmark database (dropped afterwards), or why it is unreachable. */
async function openPostgresSaver(): Promise<Checkpointer | { unavailable: string }> {
  const schema = `lg_bench_${process.pid}_${Date.now().toString(36)}`;
  const pool = new pg.Pool({ connectionString: POSTGRES_URL });
  let server: string;
  try {
    server = String((await pool.query('show server_version')).rows[0]?.server_version);
  } catch (error) {
    await pool.end().catch(() => undefined);
    return { unavailable: `${POSTGRES_URL}: ${(error as Error).message}` };
  }
  const saver = new PostgresSaver(pool, undefined, { schema });
  const drop = async () => {
    try {
      await pool.query(`drop schema if exists "${schema}" cascade`);
    } finally {
      await pool.end();
    }
  };
  try {
    await saver.setup();
  } catch (error) {
    await drop().catch(() => undefined);
    throw error;
  }
  const count = async (table: string, threadId: string) =>
    Number(
      (await pool.query(`select count(*) as n from "${schema}".${table} where thread_id = $1`, [threadId])).rows[0]?.n,
    );
  return {
    saver,
    store: 'PostgreSQL (PostgresSaver) 127.0.0.1',
    records: async (threadId) => (await count('checkpoints', threadId)) + (await count('checkpoint_writes', threadId)),
    note: async (threadId) =>
      `PostgreSQL synchronous_commit=${(await pool.query('show synchronous_commit')).rows[0]?.synchronous_commit}; ` +
      `channel values in checkpoint_blobs, ${await count('checkpoint_blobs', threadId)} more rows per run`,
    version: { 'PostgreSQL server': server },
    dispose: drop,
  };
}

/**
 * LangGraph per-step overhead on a durable checkpointer (SqliteSaver, or PostgresSaver for the PostgreSQL row), with
 * durability "sync" (a checkpoint written before the next super-step, as OAR does) and the default "async".
 */
export async function run(backend: 'sqlite' | 'postgres'): Promise<BenchOutput> {
  const opened = backend === 'sqlite' ? openSqliteSaver() : await openPostgresSaver();
  if ('unavailable' in opened) {
    return { notes: [`LangGraph PostgresSaver benchmark skipped: ${opened.unavailable}`] };
  }
  const workspace = makeWorkspace('lg');
  const steps: StepResult[] = [];
  try {
    for (const durability of ['sync', 'async'] as const) {
      await once(20, `warmup-${durability}`, workspace, opened.saver, durability);
      const gaps: number[][] = [];
      const times: number[] = [];
      for (let r = 0; r < RUNS; r++) {
        const out = await once(STEPS, `bench-${durability}-${r}`, workspace, opened.saver, durability);
        gaps.push(out.gaps);
        times.push(out.ms);
      }
      const result = summarizeSteps(
        {
          system: `LangGraph ${durability === 'sync' ? '' : '(default) '}durability=${durability}`,
          store: opened.store,
          durable: 'checkpoint per super-step (2 per step)',
          steps: STEPS,
          records: await opened.records(`bench-${durability}-0`),
          recordsLabel: 'checkpoint + write rows',
          note: `StateGraph(MessagesAnnotation) agent ⇄ ToolNode; ${await opened.note(`bench-${durability}-0`)}`,
        },
        gaps,
        times,
      );
      log(
        `LangGraph durability=${durability}, ${opened.store}: p50 ${result.p50.toFixed(2)} ms, ` +
          `p99 ${result.p99.toFixed(2)} ms`,
      );
      steps.push(result);
    }
  } finally {
    await opened.dispose();
  }
  return { steps, ...(opened.version ? { versions: opened.version } : {}) };
}
