import { cpSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { langbotRunContext } from '../../src/agent-runners/langbot/context.js';
import { LANGBOT_PLUGIN_COMMAND } from '../../src/agent-runners/langbot/discovery.js';
import { langbotModelUuid } from '../../src/agent-runners/langbot/llm-shapes.js';
import { MAX_NOTES, PluginContainerSchema, runnersOfContainer } from '../../src/agent-runners/langbot/manifest.js';
import { discoverRunners, readRunnerPackage } from '../../src/agent-runners/packages.js';
import { tempDir } from '../support/temp-dirs.js';

/**
 * Discovery of LangBot runner plugins (docs/runners.md "Running LangBot runner plugins"): a LangBot plugin folder
 * (manifest.yaml) or an oar-runner.json with `"wire": "langbot"` is a package; it is started, registers itself over
 * LangBot's wire, and its runners are listed from its container, read liberally: what OAR does not understand is a
 * note, never a skip.
 */

type Data = Record<string, unknown>;

export const LANGBOT_FIXTURE = join(import.meta.dirname, 'fixtures/langbot');
export const LANGBOT_RUNNER_ID = 'plugin:oar-test/lb-fixture/default';

describe('discovering a LangBot runner plugin', () => {
  it("lists the runner of a plugin started over LangBot's wire, with notes for what OAR reads differently", async () => {
    const found = await discoverRunners([LANGBOT_FIXTURE], process.env);
    expect(found.runners.map((r) => r.id)).toEqual([LANGBOT_RUNNER_ID]);
    const { manifest } = found.runners[0] as (typeof found.runners)[number];
    expect(manifest.name).toBe('default');
    expect(manifest.label).toEqual({ en_US: 'Fixture runner' });
    // Effective grants: what both sides understand.
    expect(manifest.capabilities.streaming).toBe(true);
    // `steering` is OAR's too (steering.pull reads it): kept; `interactions` is not.
    expect(manifest.capabilities).toMatchObject({ steering: true });
    expect(manifest.capabilities).not.toHaveProperty('interactions');
    // LangBot's host keeps every runner's state.updated.
    expect(manifest.capabilities.stateful_session).toBe(true);
    expect(manifest.permissions.models).toEqual(['invoke']);
    expect(manifest.permissions.storage).toEqual(['plugin']);
    expect(manifest.permissions).not.toHaveProperty('interactions');
    // No context policy: the default.
    expect(manifest.context).toMatchObject({ ownership: 'self_managed', bootstrap: 'current_event' });
    expect(manifest.config_schema.map((f) => [f.name, f.type])).toEqual([
      ['greeting', 'string'],
      ['model', 'string'],
    ]);
    // Nothing was skipped: every diagnostic is a note about the one runner.
    expect(found.diagnostics.every((d) => d.severity === 'note' && d.runner === LANGBOT_RUNNER_ID)).toBe(true);
    expect(found.diagnostics.map((d) => d.pointer).sort()).toEqual([
      '/capabilities/interactions',
      '/config_schema/1/type',
      '/context',
      '/permissions/interactions',
      '/permissions/models',
    ]);
    expect(found.diagnostics.find((d) => d.pointer === '/permissions/models')?.reason).toMatch(/count_tokens/);
  });

  it("reads a plugin folder without oar-runner.json as LangBot's runtime starts it", async () => {
    const dir = join(tempDir('oar-langbot-plugin-'), 'plugin');
    cpSync(LANGBOT_FIXTURE, dir, { recursive: true });
    rmSync(join(dir, 'oar-runner.json'));
    const pkg = await readRunnerPackage(dir);
    expect(pkg).toEqual({
      plugin: 'oar-test/lb-fixture',
      command: 'python3',
      args: ['-m', 'langbot_plugin.cli.__init__', 'run', '-s', '--prod'],
      wire: 'langbot',
      dir,
    });
    expect(LANGBOT_PLUGIN_COMMAND.args).toContain('--prod');
  });

  it('says why a plugin that exits before registering is not listed, with what it printed', async () => {
    const dir = tempDir('oar-langbot-exits-');
    writeFileSync(
      join(dir, 'oar-runner.json'),
      JSON.stringify({
        plugin: 'a/b',
        command: 'python3',
        args: ['-c', "import sys; print('not a frame'); sys.stderr.write('ModuleNotFoundError: langbot_plugin\\n')"],
        wire: 'langbot',
      }),
    );
    const found = await discoverRunners([dir], process.env);
    expect(found.runners).toEqual([]);
    expect(found.diagnostics).toHaveLength(1);
    expect(found.diagnostics[0]?.reason).toMatch(/^LIST_AGENT_RUNNERS failed: .*ModuleNotFoundError: langbot_plugin/);
  });

  it("bounds the notes a plugin's own declarations make (their number and length)", () => {
    const capabilities = Object.fromEntries(
      Array.from({ length: 200 }, (_, i) => [`${i === 0 ? 'x'.repeat(100_000) : 'unknown\u001b[2J'}_${i}`, true]),
    );
    const container = PluginContainerSchema.parse({
      manifest: { manifest: { metadata: { author: 'a', name: 'b' } } },
      components: [
        {
          manifest: {
            manifest: { kind: 'AgentRunner', metadata: { name: 'r' }, spec: { capabilities, context: {} } },
          },
        },
      ],
    });
    const { runners, notes } = runnersOfContainer(container);
    expect(runners).toHaveLength(1);
    expect(notes).toHaveLength(MAX_NOTES);
    expect(notes.at(-1)?.reason).toBe('151 more notes about this plugin left out');
    expect(Math.max(...notes.map((n) => n.reason.length + n.pointer.length))).toBeLessThanOrEqual(600);
    // An escape sequence in a declared name reaches no terminal.
    expect(notes.some((n) => n.reason.includes('\u001b') || n.pointer.includes('\u001b'))).toBe(false);
    expect(notes[1]?.reason).toContain('unknown?[2J_1');
  });

  it("gives the run context the flags LangBot's SDK checks before it calls: the manifest's operations, steering", () => {
    const oar = {
      run_id: 'run_1',
      resources: {
        models: [{ model_id: 'default', operations: ['invoke'] }],
        tools: [{ tool_name: 'read', description: 'reads', parameters: {} }],
        knowledge_bases: [{ kb_id: 'docs' }],
      },
      context: { available_apis: { history_page: true, state: true, artifact_read: true } },
    };
    const ctx = langbotRunContext(oar, {
      capabilities: { steering: true },
      permissions: { tools: ['call'], knowledge_bases: ['retrieve'] },
    }) as {
      resources: { models: Data[]; tools: Data[]; knowledge_bases: Data[] };
      context: { available_apis: Data };
    };
    expect(ctx.resources.models).toEqual([
      {
        model_id: langbotModelUuid('default'),
        operations: ['invoke', 'count_tokens'],
        model_type: 'llm',
        provider: null,
      },
    ]);
    // Only `call` granted: LangBot's SDK refuses get_tool_detail itself, as the host would.
    expect(ctx.resources.tools[0]?.operations).toEqual(['call']);
    expect(ctx.resources.knowledge_bases[0]?.operations).toEqual(['retrieve']);
    expect(ctx.context.available_apis).toMatchObject({
      history_page: true,
      state: true,
      prompt_get: true,
      run_get: true,
      steering_pull: true,
      run_cancel: false,
    });
    // OAR's own flags LangBot has no name for are not passed on.
    expect(ctx.context.available_apis).not.toHaveProperty('artifact_read');
    const plain = langbotRunContext(oar, { permissions: { tools: ['detail', 'call'] } }) as typeof ctx;
    expect(plain.context.available_apis.steering_pull).toBe(false);
  });

  it('says why a manifest.yaml is not a runner plugin', async () => {
    const root = tempDir('oar-langbot-bad-');
    const noRunner = join(root, 'no-runner');
    cpSync(LANGBOT_FIXTURE, noRunner, { recursive: true });
    rmSync(join(noRunner, 'oar-runner.json'));
    writeFileSync(
      join(noRunner, 'manifest.yaml'),
      'apiVersion: langbot/v1\nkind: Plugin\nmetadata:\n  author: a\n  name: b\nspec:\n  components: {}\n',
    );
    const notYaml = join(root, 'not-yaml');
    cpSync(noRunner, notYaml, { recursive: true });
    writeFileSync(join(notYaml, 'manifest.yaml'), 'kind: [unclosed\n');
    const found = await discoverRunners([noRunner, notYaml], process.env);
    expect(found.runners).toEqual([]);
    expect(found.diagnostics.map((d) => d.reason)).toEqual([
      expect.stringMatching(/no AgentRunner components/),
      expect.stringMatching(/not YAML/),
    ]);
  });
});
