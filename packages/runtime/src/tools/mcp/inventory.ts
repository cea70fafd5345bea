import type { CatalogTool } from '@oar/protocol';
import type { EventDraft } from '../../log/draft.js';
import type { ToolRegistry } from '../registry.js';

/**
 * The record of a tool inventory that changed during a turn (an MCP server's `notifications/tools/list_changed`):
 * the step after the change records the catalog it is given again, with what was added and removed. What each
 * thread was last shown is kept in memory per registry: after a restart the first step sets it again silently (a
 * turn's first step always records its catalog anyway).
 */
const shown = new WeakMap<ToolRegistry, Map<string, { version: number; names: string[] }>>();

export function inventoryChanged(
  tools: ToolRegistry,
  ids: { threadId: string; turnId: string },
  catalog: readonly CatalogTool[],
  firstStep: boolean,
): EventDraft[] {
  let threads = shown.get(tools);
  if (!threads) {
    threads = new Map();
    shown.set(tools, threads);
  }
  const names = catalog.map((tool) => tool.name);
  const before = threads.get(ids.threadId);
  threads.set(ids.threadId, { version: tools.version, names });
  if (firstStep || !before || before.version === tools.version) return [];
  const added = names.filter((name) => !before.names.includes(name));
  const removed = before.names.filter((name) => !names.includes(name));
  // Same names with a new version is still recorded: a server re-listed its tools, perhaps with other annotations.
  const inventory = tools.inventory().filter((tool) => names.includes(tool.name));
  return [
    {
      type: 'tool.catalog.resolved',
      ...ids,
      stepId: `${ids.turnId}.catalog.${tools.version}`,
      toolCallId: `${ids.turnId}.catalog.${tools.version}`,
      payload: {
        reason: 'tools_list_changed',
        added,
        removed,
        tools: inventory.map((tool) => ({
          name: tool.name,
          description: tool.description,
          capabilities: tool.capabilities,
          concurrencySafe: tool.isConcurrencySafe,
          readOnly: tool.isReadOnly,
          destructive: tool.isDestructive,
          idempotent: tool.isIdempotent,
        })),
        agents: [],
      },
    },
  ];
}
