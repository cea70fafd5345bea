import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

/** The file that makes a directory a LangBot plugin. */
export const LANGBOT_MANIFEST_FILE = 'manifest.yaml';

/**
 * How LangBot's plugin runtime starts an installed plugin: the SDK's CLI in the plugin's folder, on stdio, in
 * production mode (it registers once and exits when its connection closes). The SDK must be installed for this
 * Python (`pip install langbot-plugin`).
 */
export const LANGBOT_PLUGIN_COMMAND = {
  command: 'python3',
  args: ['-m', 'langbot_plugin.cli.__init__', 'run', '-s', '--prod'],
};

const PluginManifestSchema = z.looseObject({
  kind: z.literal('Plugin'),
  metadata: z.looseObject({
    author: z.string().regex(/^[A-Za-z0-9_.-]+$/, 'a LangBot plugin author uses letters, digits, "_", "." and "-"'),
    name: z.string().regex(/^[A-Za-z0-9_.-]+$/, 'a LangBot plugin name uses letters, digits, "_", "." and "-"'),
  }),
  spec: z
    .looseObject({ components: z.record(z.string(), z.unknown()).nullable().optional() })
    .nullable()
    .optional(),
});

/** A directory's LangBot plugin as a runner package's fields, a reason it is not one, or undefined (no manifest). */
export async function readLangbotPlugin(
  dir: string,
): Promise<{ plugin: string; command: string; args: string[]; wire: 'langbot' } | { reason: string } | undefined> {
  let text: string;
  try {
    text = await readFile(join(dir, LANGBOT_MANIFEST_FILE), 'utf8');
  } catch {
    return undefined;
  }
  let yaml: unknown;
  try {
    yaml = parseYaml(text);
  } catch (error) {
    return { reason: `${LANGBOT_MANIFEST_FILE} is not YAML: ${(error as Error).message.split('\n')[0]}` };
  }
  const parsed = PluginManifestSchema.safeParse(yaml);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      reason: `${LANGBOT_MANIFEST_FILE} is not a LangBot plugin manifest: ${issue?.message ?? 'invalid'} at /${(issue?.path ?? []).join('/')}`,
    };
  }
  if (!parsed.data.spec?.components || !('AgentRunner' in parsed.data.spec.components)) {
    return { reason: `the LangBot plugin in ${LANGBOT_MANIFEST_FILE} has no AgentRunner components` };
  }
  const { author, name } = parsed.data.metadata;
  return {
    plugin: `${author}/${name}`,
    ...LANGBOT_PLUGIN_COMMAND,
    args: [...LANGBOT_PLUGIN_COMMAND.args],
    wire: 'langbot',
  };
}
