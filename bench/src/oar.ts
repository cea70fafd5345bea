import { rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type AgentConfig,
  defineTool,
  type ModelHandle,
  READ_ONLY_FILE_TOOL,
  Runtime,
  Store,
  ToolRegistry,
  workspaceTools,
} from '@oar/runtime';
import { createScriptedModel, type ModelScript } from '@oar/runtime/testing';
import { z } from 'zod';
import { FILE_COUNT, makeWorkspace, POSTGRES_URL, type StepClock, stepPath, tempDir } from './common.js';

export type LanguageModel = ModelHandle['model'];

/**
 * A model script of `steps` act steps (one `read` each) followed by an answer; step `i` reads `stepPath(i, files)`,
 * so pass the file count of the workspace (makeWorkspace) when it is not FILE_COUNT.
 */
export function readLoopScript(steps: number, files = FILE_COUNT): ModelScript {
  return {
    description: `bench: ${steps} act steps reading a small file each, then an answer`,
    steps: [
      ...Array.from({ length: steps }, (_, i) => ({
        protocol: {
          kind: 'act',
          calls: [{ id: `read_${i}`, type: 'tool', name: 'read', args: { filePath: stepPath(i, files) } }],
        },
      })),
      { protocol: { kind: 'answer', message: `Read ${steps} files.` } },
    ],
  } as ModelScript;
}

/** The same model with every call (`doGenerate`, `doStream`) run inside `around`. */
export function wrapModel(model: LanguageModel, around: <T>(call: () => PromiseLike<T>) => Promise<T>): LanguageModel {
  return {
    specificationVersion: model.specificationVersion,
    provider: model.provider,
    modelId: model.modelId,
    supportedUrls: model.supportedUrls,
    doGenerate: (options) => around(() => model.doGenerate(options)),
    doStream: (options) => around(() => model.doStream(options)),
  };
}

/**
 * Wraps a model so each call is timed; the wrapper adds two performance.now() calls per step. A streamed call is
 * the model's until its stream is returned, and each read of a part from the model's stream afterwards is model
 * time too (`StepClock.model`): only what the runtime does with the parts counts as its overhead.
 */
export function timedModel(model: LanguageModel, clock: StepClock): LanguageModel {
  const timed = wrapModel(model, async (call) => {
    clock.start();
    try {
      return await call();
    } finally {
      clock.end();
    }
  });
  return {
    ...timed,
    async doStream(options) {
      const result = await timed.doStream(options);
      const reader = result.stream.getReader();
      const stream = new ReadableStream<typeof result.stream extends ReadableStream<infer P> ? P : never>({
        async pull(controller) {
          const started = performance.now();
          const next = await reader.read();
          clock.model(performance.now() - started);
          if (next.done) controller.close();
          else controller.enqueue(next.value);
        },
        cancel(reason) {
          return reader.cancel(reason);
        },
      });
      return { ...result, stream };
    },
  };
}

export interface OpenedStore {
  store: Store;
  label: string;
  /** Close the store and remove what the benchmark created (the PostgreSQL schema). */
  dispose(): Promise<void>;
}

/** A fresh SQLite file in a temp directory. */
export async function openSqlite(prefix: string): Promise<OpenedStore> {
  const dir = tempDir(prefix);
  const store = await Store.open(join(dir, 'oar.db'));
  return {
    store,
    label: 'SQLite (file, WAL)',
    async dispose() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A fresh schema on the benchmark PostgreSQL database, or the reason it is unreachable. */
export async function openPostgres(prefix: string): Promise<OpenedStore | { unavailable: string }> {
  const schema = `oar_bench_${prefix}_${process.pid}_${Date.now().toString(36)}`;
  let store: Store;
  try {
    store = await Store.open(POSTGRES_URL, { schema });
  } catch (error) {
    return { unavailable: `${POSTGRES_URL}: ${(error as Error).message}` };
  }
  return {
    store,
    label: 'PostgreSQL 127.0.0.1',
    async dispose() {
      try {
        await store.db.schema.dropSchema(schema).ifExists().cascade().execute();
      } finally {
        await store.close();
      }
    },
  };
}

/**
 * The peers' `read` tool under OAR's name: `readFile` of the joined path, nothing else (LangGraph's and the Agents
 * SDK's benchmark tools do exactly this). OAR's built-in `read` also confines the path (a descriptor walk that
 * refuses symlinks, hard links and swaps: about a dozen file-system calls); with this tool the two runtimes run the
 * same tool, so the difference is the runtime's own.
 */
export function peersReadTool(workspace: string) {
  return defineTool<{ filePath: string }>({
    name: 'read',
    description: 'Read a text file in the workspace.',
    input: z.strictObject({ filePath: z.string() }),
    ...READ_ONLY_FILE_TOOL,
    capabilities: [...READ_ONLY_FILE_TOOL.capabilities],
    async execute(input) {
      const text = await readFile(join(workspace, input.filePath), 'utf8');
      return { text, summary: text };
    },
  });
}

/** A runtime over `store` whose main agent replays `script`, with every model call timed on `clock`. */
export async function scriptedRuntime(
  store: Store,
  script: ModelScript,
  options: {
    clock?: StepClock;
    workspace?: string;
    maxSteps?: number;
    contextBudgetTokens?: number;
    /** Wraps the (timed) scripted model, e.g. to add latency. */
    wrapModel?: (model: LanguageModel) => LanguageModel;
    /** `peers`: the peers' plain `read` (see `peersReadTool`) instead of OAR's confined one. */
    readTool?: 'oar' | 'peers';
  } = {},
): Promise<{ runtime: Runtime; workspace: string }> {
  const workspace = options.workspace ?? makeWorkspace('ws');
  const scripted = createScriptedModel(script, { name: 'bench' });
  const timed = options.clock ? timedModel(scripted, options.clock) : scripted;
  const model = options.wrapModel ? options.wrapModel(timed) : timed;
  const handle: ModelHandle = {
    model,
    provider: 'oar-script',
    modelId: scripted.modelId,
    supportsForcedToolChoice: true,
  };
  const tools =
    options.readTool === 'peers'
      ? new ToolRegistry([...workspaceTools().filter((tool) => tool.name !== 'read'), peersReadTool(workspace)])
      : undefined;
  const runtime = await Runtime.create({
    store,
    workspaceRoot: workspace,
    ...(tools ? { tools } : {}),
    model: (_agent: AgentConfig) => handle,
    limits: {
      maxSteps: (options.maxSteps ?? script.steps.length) + 10,
      ...(options.contextBudgetTokens ? { contextBudgetTokens: options.contextBudgetTokens } : {}),
    },
  });
  return { runtime, workspace };
}

/** Runs one turn to the end and checks it completed (a benchmark of a failing turn measures nothing). */
export async function runTurn(runtime: Runtime, sessionId: string, input: string): Promise<void> {
  await runtime.submitTurn({ sessionId, input });
  await runtime.settled(sessionId);
  const events = await runtime.log.read(sessionId);
  const last = events.findLast((e) => e.type.startsWith('turn.'));
  if (last?.type !== 'turn.completed') {
    const error = events.findLast((e) => e.type === 'turn.failed' || e.type === 'runtime.error');
    throw new Error(`turn did not complete (last turn event ${last?.type}): ${JSON.stringify(error?.payload)}`);
  }
}
