/**
 * Import rules, checked by `npm run deps` (part of `npm test`, so CI fails on a new violation). The packages are
 * layers (docs/architecture.md): protocol → runtime → server / cli, with console over HTTP and the two SDKs on their
 * own. No circle of imports between source files either.
 *
 * `.dependency-cruiser-known-violations.json` lists the violations that were there when the rules came in (the
 * runtime's circles, issue 26): they are reported as known, not as failures; a new one fails. Regenerate it only to
 * REMOVE entries (`npm run deps:baseline` after a fix), never to let a new violation in.
 */
/** A layer rule: the sources of the packages `from` import none of the packages `below` (each a `|` list). */
function layer(name, from, below, comment) {
  return {
    name,
    severity: 'error',
    comment,
    from: { path: `^packages/(${from})/src/` },
    to: { path: `^packages/(${below})/` },
  };
}

/**
 * The runtime's floors, from the ground up (docs/architecture.md "Floors and ports"). A file imports only its own
 * floor and the floors below it: values and types alike. `facade` (the Runtime class and buildRuntime) stands on all
 * of them, and the package root holds only index.ts.
 */
const FLOORS = [
  'kernel',
  'config',
  'redaction',
  'store',
  'read-models',
  'log',
  'tools',
  'models',
  'policy',
  'facts',
  'control-plane',
  'scheduler',
  'executors',
  'loop',
  'agent-runners',
  'worker',
  'facade',
];
const RUNTIME = '^packages/runtime/src/';

/** One rule per floor: nothing of it imports a floor above it. */
function floorRules() {
  return FLOORS.slice(0, -1).map((floor, i) => ({
    name: `floor-${floor}`,
    severity: 'error',
    comment: `runtime/src/${floor} imports only the floors below it (${FLOORS.slice(0, i).join(', ') || 'none'}).`,
    from: { path: `${RUNTIME}${floor}/` },
    to: { path: `${RUNTIME}(${FLOORS.slice(i + 1).join('|')})/` },
  }));
}

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Files that import each other, directly or through others: one of them belongs a floor lower.',
      from: { path: '^packages/[^/]+/src/' },
      to: { circular: true },
    },
    ...floorRules(),
    {
      name: 'root-holds-only-index',
      severity: 'error',
      comment: 'The runtime package root holds index.ts alone; everything else stands on a floor.',
      from: { path: `${RUNTIME}[^/]+$`, pathNot: `${RUNTIME}index\\.ts$` },
      to: {},
    },
    {
      name: 'no-model-sdk-under-the-loop',
      severity: 'error',
      comment:
        'The control plane and the floors under it never load a model or MCP SDK: a command or a query starts no model.',
      from: { path: `${RUNTIME}(kernel|config|redaction|store|read-models|log|policy|facts|control-plane)/` },
      to: { path: 'node_modules/(@ai-sdk|ai|@modelcontextprotocol)/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'control-plane-reaches-no-model',
      severity: 'error',
      comment: 'Nothing the control plane stands on calls a model: models/ is for the loop and the runner host.',
      from: { path: `${RUNTIME}(kernel|config|redaction|store|read-models|log|policy|facts|control-plane)/` },
      to: { path: `${RUNTIME}models/` },
    },
    {
      name: 'executors-see-no-engine',
      severity: 'error',
      comment:
        "An executor runs over its ExecutorContext (scheduler/executor-context.ts): never the worker's Engine, the store, " +
        'a model or the event log. The scheduler builds the context; the executor port (executors/executor.ts) is all it sees.',
      from: { path: `${RUNTIME}executors/` },
      to: { path: `${RUNTIME}(scheduler/engine|store/store|store/migrate|log/event-log|models)(\\.ts|/)` },
    },
    layer(
      'protocol-is-the-ground',
      'protocol',
      'runtime|server|cli|console|runner-sdk|tool-cli',
      '@oar/protocol is pure logic under everything: it imports no other OAR package.',
    ),
    layer(
      'runtime-below-server-and-cli',
      'runtime',
      'server|cli|console',
      'The runtime is used by the server and the CLI, never the other way round.',
    ),
    layer(
      'server-below-cli',
      'server',
      'cli|console',
      'The server is a library the CLI starts; it knows nothing of the CLI.',
    ),
    layer(
      'console-over-http',
      'console',
      'runtime|server|cli|runner-sdk|tool-cli',
      'The console reaches the runtime over HTTP only; it may share the protocol types.',
    ),
    layer(
      'sdks-stand-alone',
      'runner-sdk|tool-cli',
      'runtime|server|cli|console',
      'A runner or a business tool is written without the engine: the SDKs import no runtime, server or CLI.',
    ),
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that resolves to nothing: a missing dependency or a typo.',
      from: { path: '^packages/[^/]+/src/' },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    // Another package is reached through node_modules (a link to its folder); its built files are leaves here.
    doNotFollow: { path: ['node_modules', '/dist/'] },
    // Type-only imports are imports too: a circle of types still ties the files together.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.base.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['types', 'import', 'node', 'default'],
      extensions: ['.ts', '.tsx', '.js', '.d.ts'],
    },
  },
};
