/**
 * @oar/runtime — the OAR engine: a durable event log with projections on SQLite or PostgreSQL, the control plane,
 * the protocol runner loop, executors (tool, agent, human, runtime), permissions, models and artifacts.
 */
export * from './artifacts.js';
export * from './config.js';
export * from './engine.js';
export * from './errors.js';
export * from './ids.js';
export * from './log/event-log.js';
export * from './models/resolve.js';
export * from './models/script.js';
export * from './policy/permissions.js';
export * from './read-models/project.js';
export * from './read-models/session.js';
export * from './read-models/snapshots.js';
export * from './read-models/thread.js';
export * from './read-models/thread-state.js';
export * from './runner/context.js';
export * from './runner/model-call.js';
export * from './runtime.js';
export * from './store/schema.js';
export * from './store/store.js';
export * from './tools/builtin/index.js';
export * from './tools/registry.js';
export * from './tools/tool.js';
export * from './tools/workspace.js';
