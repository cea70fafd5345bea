/** The AgentRunner host (docs/runners.md): discovery, bindings, the run context, results and the API proxy. */

export {
  type RunnerBinding,
  RunnerBindingSchema,
  type RunnerPolicy,
  RunnerPolicySchema,
} from '../config/runner-binding.js';
export { computeAccess, type RunAccess } from './access.js';
export { checkRunnerConfig } from './config-check.js';
export { ACTIVE_RUN_KEY, registerInProcessRunner } from './host.js';
export {
  type DiscoveredRunner,
  discoverRunners,
  RUNNER_PACKAGE_FILE,
  type RunnerDiagnostic,
  readRunnerPackage,
} from './packages.js';
export { inProcessTransport, processTransport, type RunnerConnection, type RunnerTransport } from './transport.js';
