import { oarError } from '@oar/protocol';
import { actionStatusEvent } from '../facts/action.js';
import type { RunActionStatus } from '../read-models/thread-state.js';
import type { ExecutorContext } from '../scheduler/executor-context.js';
import type { ExecuteAction } from '../scheduler/run-scheduler.js';
import { agentExecutor } from './agent.js';
import type { Executor } from './executor.js';
import { gate } from './gate.js';
import { humanExecutor } from './human.js';
import { pipelineExecutor } from './pipeline.js';
import { runtimeExecutor } from './runtime-ops.js';
import { serviceExecutor } from './service.js';
import { toolExecutor } from './tool.js';
import { threadAgent, toolWorkerExecutor, toolWorkerTools } from './tool-worker.js';

/**
 * Run one action through its executor (scheduler/run-scheduler.ts `ExecuteAction`): prepare, authorize through the
 * one gate, run. A preparation that refuses the action is recorded here, as the action's failure.
 */
async function drive<P>(executor: Executor<P>, ctx: ExecutorContext): Promise<RunActionStatus> {
  const preparation = await executor.prepare(ctx);
  if ('settled' in preparation) return preparation.settled;
  if ('refused' in preparation) {
    await ctx.record([actionStatusEvent(ctx, 'failed', preparation.refused)]);
    return 'failed';
  }
  if ('unjudged' in preparation) return executor.run(ctx, preparation.unjudged, { allowed: [] });
  const gated = await gate(ctx, preparation.authorize, preparation.hooks);
  if ('stopped' in gated) return gated.stopped;
  return executor.run(ctx, preparation.prepared, gated);
}

/** The executors by type: what the scheduler runs an action with. */
export const executeAction: ExecuteAction = async (ctx) => {
  switch (ctx.action.executor.type) {
    case 'tool': {
      // A task in words rather than a complete call: the tool worker does it (executors/tool-worker.ts).
      const tools = toolWorkerTools(ctx.config, threadAgent(ctx.config, ctx.thread), ctx.action);
      return tools ? drive(toolWorkerExecutor(tools), ctx) : drive(toolExecutor, ctx);
    }
    case 'agent':
      return drive(agentExecutor, ctx);
    case 'human':
      return drive(humanExecutor, ctx);
    case 'runtime':
      return drive(runtimeExecutor, ctx);
    case 'pipeline':
      return drive(pipelineExecutor, ctx);
    case 'service':
      return drive(serviceExecutor, ctx);
    default: {
      const error = oarError(
        'executor_unavailable',
        `no ${ctx.action.executor.type} executor "${ctx.action.executor.target}" is configured in this runtime`,
      );
      await ctx.record([actionStatusEvent(ctx, 'failed', { error })]);
      return 'failed';
    }
  }
};
