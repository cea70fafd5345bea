import { oarError } from '@oar/protocol';
import { actionStatusEvent } from '../facts/action.js';
import type { ExecuteAction } from '../scheduler/run-scheduler.js';
import { runAgentAction } from './agent.js';
import { runHumanAction } from './human.js';
import { runPipelineAction } from './pipeline.js';
import { runRuntimeAction } from './runtime-ops.js';
import { runServiceAction } from './service.js';
import { runToolAction } from './tool.js';
import { runToolWorker, threadAgent, toolWorkerTools } from './tool-worker.js';

/** The executors by type: what the scheduler runs an action with (scheduler/run-scheduler.ts `ExecuteAction`). */
export const executeAction: ExecuteAction = async (ctx) => {
  switch (ctx.action.executor.type) {
    case 'tool': {
      // A task in words rather than a complete call: the tool worker does it (executors/tool-worker.ts).
      const workerTools = toolWorkerTools(ctx.engine, threadAgent(ctx.engine, ctx.thread), ctx.action);
      return workerTools ? runToolWorker(ctx, workerTools) : runToolAction(ctx);
    }
    case 'agent':
      return runAgentAction(ctx);
    case 'human':
      return runHumanAction(ctx);
    case 'runtime':
      return runRuntimeAction(ctx);
    case 'pipeline':
      return runPipelineAction(ctx);
    case 'service':
      return runServiceAction(ctx);
    default: {
      const error = oarError(
        'executor_unavailable',
        `no ${ctx.action.executor.type} executor "${ctx.action.executor.target}" is configured in this runtime`,
      );
      await ctx.engine.append(ctx.thread.sessionId, [actionStatusEvent(ctx, 'failed', { error })]);
      return 'failed';
    }
  }
};
