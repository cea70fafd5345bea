import { Cron } from 'croner';
import { z } from 'zod';
import { BindingUpdateSchema } from './binding.js';
import { BudgetsSchema } from './budgets.js';

/**
 * Schedules (docs/schedules.md): agents on a timetable. One schema serves `oar.config.json`'s `schedules`, the API's
 * `add` and the stored definition, so a schedule means the same wherever it was written. Each firing starts one
 * piece of work — a turn in an existing session, a new session, or a job — and a firing that creates a session gives
 * it the schedule's own binding (`binding`, with `budget` as its budgets): its own spending limits and permission
 * policy, whatever the runtime's defaults are.
 */

const Id = z.string().min(1).max(256);
/** Schedule ids are chosen by people (config) or generated (`sch_…`); they end up in session ids, hence the charset. */
export const ScheduleIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'schedule ids are 1-64 letters, digits, "_", ".", ":" or "-"');
const Text = z
  .string()
  .min(1)
  .max(64 * 1024);

export const ScheduleStartSchema = z.discriminatedUnion('kind', [
  /** A turn in an existing session (its main thread unless `threadId`), under that session's own binding. */
  z.strictObject({ kind: z.literal('turn'), sessionId: Id, threadId: Id.optional(), input: Text }),
  /** A new session per firing, with a first turn of `input`. */
  z.strictObject({
    kind: z.literal('session'),
    input: Text,
    title: z.string().max(200).optional(),
    agent: Id.optional(),
  }),
  /** A job per firing (docs/jobs.md), in a new session of its own. */
  z.strictObject({
    kind: z.literal('job'),
    items: z.array(z.unknown()).min(1).max(1_000),
    prompt: Text,
    name: z.string().max(200).optional(),
    agent: Id.optional(),
    policy: z
      .strictObject({
        concurrency: z.number().int().min(1).max(64).optional(),
        maxAttempts: z.number().int().min(1).max(10).optional(),
        backoffMs: z.number().int().min(0).max(3_600_000).optional(),
        maxBackoffMs: z.number().int().min(0).max(86_400_000).optional(),
        failFast: z.boolean().optional(),
      })
      .optional(),
  }),
]);
export type ScheduleStart = z.infer<typeof ScheduleStartSchema>;

export const CATCH_UP_POLICIES = ['skip', 'run_once'] as const;
export const OVERLAP_POLICIES = ['skip', 'queue', 'cancel'] as const;

const ScheduleFields = z.strictObject({
  scheduleId: ScheduleIdSchema,
  /** Five fields (minute first) or six (second first), as croner reads them. */
  cron: z.string().min(1).max(200),
  /** An IANA time zone (`Europe/Paris`) the cron fields are read in; default UTC. */
  timezone: z.string().min(1).max(100).optional(),
  start: ScheduleStartSchema,
  /** Changes to the binding of the session a firing creates (its permission policy, agents, limits…). */
  binding: BindingUpdateSchema.optional(),
  /** The budgets of each firing's session (shorthand for `binding.budgets`, which it replaces). */
  budget: BudgetsSchema.optional(),
  /** Firings missed while no worker ran: one `skipped` record (default), or one firing now for the latest. */
  catchUp: z.enum(CATCH_UP_POLICIES).default('skip'),
  /** A firing while the previous one's work still runs: skip it (default), queue it, or cancel the old work. */
  overlap: z.enum(OVERLAP_POLICIES).default('skip'),
  paused: z.boolean().default(false),
});

/** What is wrong with a cron expression in a time zone (croner's message), or undefined when it is usable. */
export function cronProblem(
  cron: string,
  timezone?: string,
): { field: 'cron' | 'timezone'; message: string } | undefined {
  let parsed: Cron;
  try {
    parsed = new Cron(cron, { paused: true });
  } catch (error) {
    return { field: 'cron', message: (error as Error).message };
  }
  parsed.stop();
  if (timezone === undefined) return undefined;
  try {
    // croner checks a time zone only when it computes a time.
    new Cron(cron, { paused: true, timezone }).nextRun();
    return undefined;
  } catch (error) {
    return { field: 'timezone', message: (error as Error).message };
  }
}

/** The checks one field cannot make alone: a usable cron in its time zone, a binding only where a session is made. */
function refineSchedule(
  value: { cron: string; timezone?: string | undefined; start: ScheduleStart; binding?: unknown; budget?: unknown },
  ctx: z.RefinementCtx,
) {
  const problem = cronProblem(value.cron, value.timezone);
  if (problem) ctx.addIssue({ code: 'custom', path: [problem.field], message: problem.message });
  if (value.start.kind === 'turn') {
    for (const field of ['binding', 'budget'] as const) {
      if (value[field] !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: [field],
          message:
            'a turn in an existing session runs under that session`s binding: give `binding`/`budget` only to session and job schedules',
        });
      }
    }
  }
}

/** A schedule as `oar.config.json` names it (and as it is stored, defaults applied). */
export const ScheduleDefinitionSchema = ScheduleFields.superRefine(refineSchedule);
export type ScheduleDefinition = z.infer<typeof ScheduleDefinitionSchema>;
export type ScheduleDefinitionInput = z.input<typeof ScheduleDefinitionSchema>;

export const SchedulesSchema = z.array(ScheduleDefinitionSchema).max(1_000);

/** `runtime.schedules.add(…)`: the id is generated when absent; `workspaceId` is an API key's workspace. */
export const AddScheduleInputSchema = ScheduleFields.extend({
  scheduleId: ScheduleIdSchema.optional(),
  workspaceId: Id.optional(),
}).superRefine(refineSchedule);
export type AddScheduleInput = z.input<typeof AddScheduleInputSchema>;

/** What a session or turn a firing started records about it (`payload.schedule`). */
export interface ScheduleFact {
  scheduleId: string;
  /** The cron time this firing is for (ISO), not when it ran. */
  firedAt: string;
  kind: ScheduleStart['kind'];
  /** The hash of the schedule's own binding changes, when it has any (the session records the whole binding). */
  bindingHash?: string;
  /** A catch-up firing (`catchUp: run_once`): how many cron times were missed, this one the latest. */
  catchUp?: { missed: number };
}
