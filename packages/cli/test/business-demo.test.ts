import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { ToolAgentOutputSchema, UiSchemaSchema } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import { assertEventsConform } from '../../runtime/test/support/schemas.js';
import { ndjson, oarIn, tempDir } from './cli-helpers.js';

/**
 * `oar demo --tools business` through the real binary: the example business CLI behind project_cli, a
 * self-corrected call, a created event rendered as UI, and a delete that waits for an approval.
 */
describe('oar demo --tools business', () => {
  it('shows a self-corrected call, a created event as UI and an approved delete', () => {
    const cwd = tempDir();
    const run = oarIn(cwd, ['demo', '--tools', 'business']);
    expect(run.code, run.stderr).toBe(0);
    // The naive datetime is refused with the method's schema, then the corrected call succeeds.
    expect(run.stdout).toContain('invalid_action_input');
    expect(run.stdout).toContain('create_fixed project_cli — calendar.create: success');
    // The created event as text UI (ui_schema rendered for a terminal).
    expect(run.stdout).toContain('Event: Design follow-up');
    expect(run.stdout).toContain('2026-12-02T15:00:00+08:00');
    // Only the delete asks (a per-operation allow rule covers create and share), and it ran once approved.
    expect(run.stdout.match(/\? Allow project_cli/g)).toHaveLength(1);
    expect(run.stdout).toContain('? Allow project_cli calendar.delete?');
    expect(run.stdout).toContain('cancel_lunch project_cli — calendar.delete: success');
    expect(existsSync(join(cwd, '.oar/demo-business/business.db'))).toBe(true);
  });

  it('--json prints the events and, after each business call with UI, its ui_schema JSON', () => {
    const cwd = tempDir();
    const run = oarIn(cwd, ['demo', '--tools', 'business', '--json']);
    expect(run.code, run.stderr).toBe(0);
    const lines = ndjson(run.stdout) as Record<string, unknown>[];
    const events = lines.filter((l) => typeof l.type === 'string') as unknown as RuntimeEvent[];
    assertEventsConform(events);
    const results = events.filter((e) => e.type === 'tool.result' || e.type === 'tool.failed');
    const recordOf = (event: RuntimeEvent | undefined) =>
      ToolAgentOutputSchema.parse((event?.payload as Record<string, unknown> | undefined)?.toolAgentOutput);
    for (const event of results) recordOf(event);
    const failed = events.find((e) => e.type === 'tool.failed');
    expect(recordOf(failed).error?.input_schema).toMatchObject({ start_at: 'datetime with offset' });
    const uis = lines.filter((l) => 'uiSchema' in l).map((l) => UiSchemaSchema.parse(l.uiSchema));
    expect(uis.map((u) => u.components[0]?.type)).toEqual(
      expect.arrayContaining(['list', 'calendar_event', 'confirmation']),
    );
    expect((lines.at(-1) as { result: { status: string } }).result.status).toBe('completed');
  });

  it('refuses an unknown --tools kind with a structured error', () => {
    const run = oarIn(tempDir(), ['demo', '--tools', 'shell']);
    expect(run.code).toBe(2);
    expect(run.stdout + run.stderr).toContain('invalid_option');
  });
});
