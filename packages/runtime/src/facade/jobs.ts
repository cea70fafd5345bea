import type { Commands } from '../control-plane/commands.js';
import type { JobIdInput, JobView, ListJobsInput, StartJobInput } from '../control-plane/jobs.js';
import { checkedCall } from './inputs.js';

/**
 * The runtime's jobs (docs/jobs.md), as `runtime.jobs.start(…)`: the commands with their inputs checked, and after
 * a change this process's worker looks at the job's session at once (its items' threads have work).
 */
export class RuntimeJobs {
  constructor(
    private readonly commands: Commands,
    private readonly look: (sessionId: string) => Promise<void> | undefined,
  ) {}

  /** Start a job (`startJob`): in `sessionId`, or in a new session of its own. */
  start(input: StartJobInput): Promise<JobView> {
    return checkedCall('startJob', 'startJob', input, (i) => this.changed(this.commands.startJob(i)));
  }

  get(input: JobIdInput): Promise<JobView> {
    return checkedCall('getJob', 'getJob', input, (i) => this.commands.getJob(i));
  }

  list(input: ListJobsInput = {}) {
    return checkedCall('listJobs', 'listJobs', input, (i) => this.commands.listJobs(i));
  }

  /** Cancel a job (`cancelJob`): its running items are interrupted, the rest never start. */
  cancel(input: JobIdInput & { reason?: string }): Promise<JobView> {
    return checkedCall('cancelJob', 'cancelJob', input, (i) => this.changed(this.commands.cancelJob(i)));
  }

  /** Run a finished job's failed and cancelled items again (`retryJob`). */
  retry(input: JobIdInput): Promise<JobView> {
    return checkedCall('retryJob', 'retryJob', input, (i) => this.changed(this.commands.retryJob(i)));
  }

  private async changed(command: Promise<JobView>): Promise<JobView> {
    const job = await command;
    // Committed: a failed look (a store hiccup) must not report the command as failed; the notifier finds the work.
    await Promise.resolve(this.look(job.sessionId)).catch(() => undefined);
    return job;
  }
}
