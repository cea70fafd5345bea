import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The rules of the runtime's floors that dependency-cruiser's rules (`npm run deps`) cannot say: one place to
 * authorize, one place a side effect's start is recorded, dialect differences only behind the store's port, files
 * small enough to read, and a control plane that stands on little (docs/architecture.md "Floors and ports").
 */
const SRC = join(import.meta.dirname, '../src');
const ROOT = join(import.meta.dirname, '../../..');

function sources(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

const files = sources().map((path) => ({ path: relative(SRC, path), text: readFileSync(path, 'utf8') }));
/** The files whose code (comments aside) matches `pattern`. */
const filesWith = (pattern: RegExp) =>
  files.filter((file) => pattern.test(file.text.replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, ''))).map((file) => file.path);

/** Whether `file` imports `name` from the source file `from` (a path under src/). */
function importsName(file: { path: string; text: string }, name: string, from: string): boolean {
  for (const match of file.text.matchAll(/import\s*(?:type\s*)?\{([^}]*)\}\s*from\s*'([^']+)'/g)) {
    const names = (match[1] ?? '').split(',').map((n) => n.trim().replace(/^type\s+/, ''));
    const target = join(dirname(file.path), (match[2] ?? '').replace(/\.js$/, '.ts'));
    if (names.includes(name) && target === from) return true;
  }
  return false;
}

describe('the runtime floors', () => {
  it('reads every source file', () => {
    expect(files.length).toBeGreaterThan(150);
    expect(files.map((f) => f.path)).toContain('policy/authorize.ts');
  });

  it('judges permissions in one file: policy/authorize.ts', () => {
    // The policy's evaluator is imported by authorize.ts alone (the `evaluate_permission` command asks authorize too).
    expect(
      files.filter((file) => importsName(file, 'evaluatePermission', 'policy/permissions.ts')).map((file) => file.path),
    ).toEqual(['policy/authorize.ts']);
    expect(filesWith(/type: 'permission\.evaluated'/)).toEqual(['policy/authorize.ts']);
  });

  it("builds a side effect's facts in one file, and records its start only through the bracket", () => {
    expect(filesWith(/type: 'tool\.(started|result|failed)'/)).toEqual(['facts/tool-call.ts']);
    expect(filesWith(/[^\w.]toolStarted\(/).filter((path) => path !== 'facts/tool-call.ts')).toEqual([
      'scheduler/bracket.ts',
    ]);
  });

  it('gates an action in one place: the executor driver', () => {
    expect(filesWith(/[^\w.]gate\(/).filter((path) => path !== 'executors/gate.ts')).toEqual(['executors/registry.ts']);
  });

  it("builds a model call's completion in one file: models/cost.ts", () => {
    expect(filesWith(/type: 'model\.completed'/)).toEqual(['models/cost.ts']);
  });

  it('asks which dialect the store is only inside store/', () => {
    const checks = filesWith(/dialect\s*[!=]==|[!=]==\s*'(postgres|sqlite)'/).filter(
      (path) => !path.startsWith('store/'),
    );
    expect(checks).toEqual([]);
  });

  it('keeps every source file at 600 lines or fewer, and only index.ts at the package root', () => {
    const long = files.filter((file) => file.text.split('\n').length > 600).map((file) => file.path);
    expect(long).toEqual([]);
    expect(files.filter((file) => !file.path.includes('/')).map((file) => file.path)).toEqual(['index.ts']);
  });

  it("stands the control plane on at most 43 files beneath it, none of them the loop's or a model SDK's", () => {
    // The import graph as dependency-cruiser reads it; type-only imports cost nothing at run time and are left out.
    const graph = JSON.parse(
      execFileSync(
        join(ROOT, 'node_modules/.bin/depcruise'),
        ['packages/runtime/src', '--config', '.dependency-cruiser.cjs', '--output-type', 'json'],
        { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
      ),
    ) as { modules: { source: string; dependencies: { resolved: string; dependencyTypes: string[] }[] }[] };
    const prefix = 'packages/runtime/src/';
    const bySource = new Map(graph.modules.map((m) => [m.source, m]));
    const closure = new Set<string>();
    const external = new Set<string>();
    const stack = graph.modules.map((m) => m.source).filter((s) => s.startsWith(`${prefix}control-plane/`));
    for (let source = stack.pop(); source !== undefined; source = stack.pop()) {
      if (closure.has(source)) continue;
      closure.add(source);
      for (const dep of bySource.get(source)?.dependencies ?? []) {
        if (dep.dependencyTypes.includes('type-only')) continue;
        if (dep.resolved.startsWith(prefix)) stack.push(dep.resolved);
        else external.add(dep.resolved);
      }
    }
    const files = [...closure].map((s) => s.slice(prefix.length));
    // Its own files are its commands, one per resource (the standard names 46 commands): what it stands on — the
    // read models, a few facts, the kernel, three schema files of config/ — is what must stay small.
    const beneath = files.filter((f) => !f.startsWith('control-plane/'));
    expect(beneath.length).toBeGreaterThan(10);
    // 37: read-models/processes.ts (the process reducers split out of thread.ts) and store/process-input.ts (the text
    // write_process_stdin hands over outside the log). 39: read-models/file-versions.ts (the file versions a
    // rollback restores) and read-models/rollback.ts (the rollback's reducer, split out of thread.ts).
    // 43: read-models/job.ts, facts/job-items.ts and facts/job-start.ts (jobs: their reducer, the facts an item's
    // turn end writes, a job's start shared with the model's start_job action), kernel/digest.ts (one SHA-256 helper
    // for artifacts, file versions and rollbacks).
    expect(beneath.length).toBeLessThanOrEqual(43);
    const upper = /^(models|loop|scheduler|executors|agent-runners|worker|facade|tools)\//;
    expect(files.filter((f) => upper.test(f))).toEqual([]);
    expect([...external].filter((dep) => /(^|\/)(ai|@ai-sdk|openai|@anthropic-ai)(\/|$)/.test(dep))).toEqual([]);
  });
});
