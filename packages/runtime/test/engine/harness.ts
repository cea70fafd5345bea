import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type AgentConfig, type ModelScript, Runtime, type RuntimeOptions, Store } from '../../src/index.js';
import { createScriptedModel } from '../../src/models/testing.js';
import { tempDir } from '../support/temp-dirs.js';

export interface Harness {
  runtime: Runtime;
  store: Store;
  workspace: string;
  dir: string;
}

/** A runtime on a real SQLite file (or the given store URL) with a scripted model and a temp workspace. */
export async function harness(
  script: ModelScript,
  options: Partial<RuntimeOptions> & { storeUrl?: string; files?: Record<string, string> } = {},
): Promise<Harness> {
  // Removed after the test file (support/temp-dirs.ts).
  const dir = tempDir('oar-engine-');
  const workspace = tempDir('oar-ws-');
  for (const [name, content] of Object.entries(
    options.files ?? { 'README.md': '# Sample\n\nHello from the sample workspace.\n' },
  )) {
    writeFileSync(join(workspace, name), content);
  }
  const store = options.store ?? (await Store.open(options.storeUrl ?? join(dir, 'oar.db')));
  const models = new Map<string, ReturnType<typeof createScriptedModel>>();
  const runtime = await Runtime.create({
    workspaceRoot: workspace,
    ...options,
    store,
    model:
      options.model ??
      ((agent: AgentConfig) => {
        let model = models.get(agent.name);
        if (!model) {
          model = createScriptedModel(script, agent.name === 'main' ? {} : { agent: agent.name });
          models.set(agent.name, model);
        }
        return { model, provider: 'oar-script', modelId: model.modelId, supportsForcedToolChoice: true };
      }),
  });
  return { runtime, store, workspace, dir };
}
