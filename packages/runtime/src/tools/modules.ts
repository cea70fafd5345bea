import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';
import { OarRuntimeError } from '../kernel/errors.js';
import type { AnyTool } from './tool.js';

/** Load an ES module exporting tools (default export or `tools`: a ToolDefinition or an array of them). */
export async function loadToolModule(spec: string): Promise<AnyTool[]> {
  const url = isAbsolute(spec) ? pathToFileURL(spec).href : spec;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(url)) as Record<string, unknown>;
  } catch (error) {
    throw new OarRuntimeError('tool_module_unloadable', `cannot load tool module ${spec}: ${(error as Error).message}`);
  }
  const exported = mod.tools ?? mod.default;
  const list = Array.isArray(exported) ? exported : exported ? [exported] : [];
  if (list.length === 0 || !list.every((t) => t && typeof t === 'object' && 'name' in t && 'execute' in t)) {
    throw new OarRuntimeError(
      'invalid_tool_module',
      `${spec} must export tools (default or "tools"): ToolDefinition objects`,
    );
  }
  return list as AnyTool[];
}
