/**
 * Import rules, checked by `npm run deps` (part of `npm test`, so CI fails on a new violation). The packages are
 * layers (docs/architecture.md): protocol → runtime → server / cli, with console over HTTP and the two SDKs on their
 * own. No circle of imports between source files either.
 *
 * `.dependency-cruiser-known-violations.json` lists the violations that were there when the rules came in (the
 * runtime's circles, issue 26): they are reported as known, not as failures; a new one fails. Regenerate it only to
 * REMOVE entries (`npm run deps:baseline` after a fix), never to let a new violation in.
 */
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
    {
      name: 'protocol-is-the-ground',
      severity: 'error',
      comment: '@oar/protocol is pure logic under everything: it imports no other OAR package.',
      from: { path: '^packages/protocol/src/' },
      to: { path: '^packages/(runtime|server|cli|console|runner-sdk|tool-cli)/' },
    },
    {
      name: 'runtime-below-server-and-cli',
      severity: 'error',
      comment: 'The runtime is used by the server and the CLI, never the other way round.',
      from: { path: '^packages/runtime/src/' },
      to: { path: '^packages/(server|cli|console)/' },
    },
    {
      name: 'server-below-cli',
      severity: 'error',
      comment: 'The server is a library the CLI starts; it knows nothing of the CLI.',
      from: { path: '^packages/server/src/' },
      to: { path: '^packages/(cli|console)/' },
    },
    {
      name: 'console-over-http',
      severity: 'error',
      comment: 'The console reaches the runtime over HTTP only; it may share the protocol types.',
      from: { path: '^packages/console/src/' },
      to: { path: '^packages/(runtime|server|cli|runner-sdk|tool-cli)/' },
    },
    {
      name: 'sdks-stand-alone',
      severity: 'error',
      comment: 'A runner or a business tool is written without the engine: the SDKs import no runtime, server or CLI.',
      from: { path: '^packages/(runner-sdk|tool-cli)/src/' },
      to: { path: '^packages/(runtime|server|cli|console)/' },
    },
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
