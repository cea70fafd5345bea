import { mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, expect } from 'vitest';
import { ToolError } from '../../src/kernel/errors.js';
import type { AnyTool, ToolContext, ToolOutput } from '../../src/tools/tool.js';

export interface Sandbox {
  /** Real path of the workspace root. */
  root: string;
  /** Real path of a directory next to the workspace, outside it. */
  outside: string;
  /** Real path of the temp directory holding both. */
  parent: string;
}

const created: string[] = [];

afterEach(async () => {
  await Promise.all(created.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

/** A fresh real temp directory with `ws/` (the workspace) and `outside/` side by side; removed after each test. */
export async function sandbox(): Promise<Sandbox> {
  const parent = await realpath(await mkdtemp(path.join(tmpdir(), 'oar-tools-')));
  created.push(parent);
  const root = path.join(parent, 'ws');
  const outside = path.join(parent, 'outside');
  await mkdir(root);
  await mkdir(outside);
  return { root, outside, parent };
}

/** Create files (with parent directories) under `base` from a path → content map. */
export async function files(base: string, entries: Record<string, string | Uint8Array>): Promise<void> {
  for (const [name, content] of Object.entries(entries)) {
    const target = path.join(base, name);
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, content);
  }
}

export function toolContext(root: string, signal: AbortSignal = new AbortController().signal): ToolContext {
  return { workspaceRoot: root, signal, progress: () => {} };
}

export function abortedContext(root: string): ToolContext {
  const controller = new AbortController();
  controller.abort();
  return toolContext(root, controller.signal);
}

/** Parse the input with the tool's schema (as the registry does, applying defaults) and execute it. */
export async function run(tool: AnyTool, input: unknown, context: ToolContext): Promise<ToolOutput> {
  return tool.execute(tool.input.parse(input), context);
}

/** Await a rejection and check it is a ToolError with `code`; returns it for further assertions. */
export async function toolError(promise: Promise<unknown>, code: string): Promise<ToolError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(ToolError);
  expect((error as ToolError).code).toBe(code);
  return error as ToolError;
}
