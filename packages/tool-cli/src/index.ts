/**
 * @oar/tool-cli — the SDK of a business CLI behind OAR's `project_cli` tool (Agent Tool Protocol): the router
 * (module.method whitelist, strict zod schemas, per-method facts, `--describe`), the output contract, and the
 * controlled credential. No dependency on the runtime: a CLI ships with this package alone.
 */
export * from './credential.js';
export * from './output.js';
export * from './router.js';
export { jsonSchemaText, schemaText } from './schema-text.js';
