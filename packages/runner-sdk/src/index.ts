/**
 * @oar/runner-sdk: write an AgentRunner (AgentRunner Protocol v1) for OAR without the runtime package. The wire
 * entities are zod schemas shared with the host; `defineRunner` serves them over NDJSON on stdio; the proxy client
 * calls the host's per-run API.
 */
export * from './define-runner.js';
export * from './errors.js';
export * from './json-schemas.js';
export * from './proxy.js';
export * from './rpc.js';
export * from './schemas.js';
