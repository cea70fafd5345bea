/**
 * @oar/protocol — the pure protocol core of OAR: the AgentProtocolOutput carrier and the agent-protocol DSL,
 * repairs, direct-request recovery, normalization to one Declaration, graph validation, the result envelope
 * and observations, the Markdown transcript, the Agent Runtime event catalog, snapshots and JSON Schema export, and the
 * Agent Tool Protocol's ToolAgentOutput with its `ui_schema` codec.
 * No I/O and no Node-only APIs: it runs anywhere JavaScript runs.
 */
export * from './carrier.js';
export * from './catalog.js';
export * from './declaration.js';
export * from './dsl.js';
export * from './errors.js';
export * from './events/index.js';
export * from './json-schema.js';
export * from './markdown.js';
export * from './normalize.js';
export * from './parse.js';
export * from './partial-json.js';
export * from './recovery.js';
export * from './repair.js';
export * from './result.js';
export * from './snapshot.js';
export * from './tool-agent-output.js';
export * from './transcript.js';
export * from './ui-schema.js';
export * from './validate.js';
