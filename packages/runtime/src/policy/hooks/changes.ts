import type { HooksConfig } from '../../config/hooks.js';
import type { EventDraft } from '../../log/draft.js';

/**
 * The `policy.changed` fact of a binding update that adds, removes or changes hooks: which, by name, and the
 * hooks in force after it. Nothing when the hooks are the same (an update of something else).
 */
export function hooksChanged(
  before: HooksConfig | undefined,
  after: HooksConfig | undefined,
  bindingHash: string,
): EventDraft[] {
  const was = new Map((before ?? []).map((hook) => [hook.name, JSON.stringify(hook)]));
  const now = new Map((after ?? []).map((hook) => [hook.name, JSON.stringify(hook)]));
  const added = [...now.keys()].filter((name) => !was.has(name));
  const removed = [...was.keys()].filter((name) => !now.has(name));
  const changed = [...now.keys()].filter((name) => was.has(name) && was.get(name) !== now.get(name));
  if (added.length + removed.length + changed.length === 0) return [];
  return [
    {
      type: 'policy.changed',
      payload: {
        policy: 'hooks',
        added,
        removed,
        changed,
        hooks: (after ?? []).map((hook) => ({ name: hook.name, point: hook.point })),
        bindingHash,
      },
    },
  ];
}
