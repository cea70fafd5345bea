import { SCHEMA_NAMES } from '@oar/protocol/schema-names';
import { EXIT } from '@oar/runtime/constants';
import { Command, CommanderError } from 'commander';
import { registerArtifactCommands } from './artifact-commands.js';
import { registerControlCommands } from './control-commands.js';
import { registerDemoCommand } from './demo.js';
import { registerInitCommand } from './init-command.js';
import { registerJobCommands } from './job-commands.js';
import { registerProtocolCommands } from './protocol-commands.js';
import { registerRunnerCommands } from './runner-commands.js';
import { registerRuntimeCommands } from './runtime-commands.js';
import { registerScheduleCommands } from './schedule-commands.js';
import { registerServeCommands } from './serve-commands.js';
import { registerSubagentCommands } from './subagent-commands.js';
import { registerTaskCommands } from './task-commands.js';
import { tracingFromEnv } from './tracing.js';
import { printUsageError } from './usage.js';
import { registerWorkerCommands } from './worker-commands.js';

/*
 * Start-up: `oar --version` and `oar --help` load this module, commander and the command modules' registrations —
 * nothing else. The engine, the server, the protocol core, zod and the drivers are imported by the action that needs
 * them (`await import(…)`), and by the error path below when an error is printed: loaded up front they cost every
 * command about ten times a bare `node` start (bench: BENCH_ONLY=startup).
 */

export const VERSION = '0.1.0';

/** What to do about a runtime error, in the CLI's own terms (the runtime itself knows no flags). */
const CLI_HINTS: Record<string, string> = {
  model_required: 'pass --model SPEC or set "model" in oar.config.json',
  workspace_unavailable:
    'pass --workspace DIR with an existing directory, or `oar session update SESSION --workspace DIR`',
  binding_unavailable:
    'run this session where its tools are available (tools.modules in its binding: `oar session show`)',
  // Commands look in one store: the working directory's .oar/oar.db unless told otherwise.
  store_not_found: 'run the command where the store is, or name it with --store URL (or the OAR_STORE variable)',
  session_not_found:
    '`oar sessions` lists the sessions of this store; --store URL (or the OAR_STORE variable) looks in another',
};

/**
 * Runs the oar CLI and returns the exit code: 0 ok, 1 the checked input was not ok, 2 usage error.
 * Returning the code (rather than calling process.exit) lets output streams flush — and the last spans, when the
 * `OTEL_*` environment turns tracing on (tracing.ts).
 */
export async function main(argv: string[]): Promise<number> {
  const tracing = await tracingFromEnv(VERSION);
  try {
    return await run(argv);
  } finally {
    await tracing?.shutdown();
  }
}

async function run(argv: string[]): Promise<number> {
  let exitCode = 0;
  let commanderText = '';
  const setExit = (code: number) => {
    exitCode = code;
  };
  const program = new Command('oar')
    .description('OAR, the Open Agent Runtime')
    .version(VERSION)
    .exitOverride()
    // Commander's own prose for a usage mistake (and the help it shows for a group without its subcommand) is
    // replaced by one usage error below (exit 2): text in a terminal, else structured (usage.ts).
    .configureOutput({
      writeErr: (text) => {
        commanderText += text;
      },
      outputError: () => undefined,
    });

  registerInitCommand(program, setExit);
  registerDemoCommand(program, setExit);
  registerRuntimeCommands(program, setExit);
  registerTaskCommands(program, setExit);
  registerSubagentCommands(program, setExit);
  registerJobCommands(program, setExit);
  registerScheduleCommands(program, setExit);
  registerControlCommands(program, setExit);
  registerProtocolCommands(program, setExit);
  registerServeCommands(program, setExit);
  registerWorkerCommands(program, setExit);
  registerRunnerCommands(program, setExit);
  registerArtifactCommands(program, setExit);
  program
    .command('schema')
    .description(`print a JSON Schema (2020-12): ${SCHEMA_NAMES.join(' | ')}`)
    .argument('<name>', SCHEMA_NAMES.join(' | '))
    .action(async (name: string) => {
      const [{ oarError, schemaFor }, { printJson, UsageError }] = await Promise.all([
        import('@oar/protocol'),
        import('./io.js'),
      ]);
      const schema = schemaFor(name);
      if (!schema) {
        throw new UsageError(
          oarError('unknown_schema', `unknown schema "${name}"; choose one of ${SCHEMA_NAMES.join(', ')}`),
        );
      }
      printJson(schema);
    });

  try {
    await program.parseAsync(argv, { from: 'user' });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end through exitOverride with code 0; anything else is a usage error.
      if (error.exitCode === 0) return 0;
      await printUsageError(program, argv, error, commanderText);
      return EXIT.usage;
    }
    // Only an error thrown by an action gets here, and that action loaded what prints it.
    const [{ oarError }, { exitCodeFor, OarRuntimeError }, { printError, UsageError }] = await Promise.all([
      import('@oar/protocol'),
      import('@oar/runtime'),
      import('./io.js'),
    ]);
    // Every error is printed redacted (printError): it may repeat an input that holds a secret.
    if (error instanceof UsageError) {
      printError(error.error);
      return EXIT.usage;
    }
    if (error instanceof OarRuntimeError) {
      // A structured error with its code's exit status (docs/errors.md): bad input 2, store 74, busy 75, bug 70.
      // The runtime's own hint, when it has one, is the specific one (an MCP server's setting, a model's variable).
      const own = error.error.details?.hint;
      const hint = typeof own === 'string' ? own : CLI_HINTS[error.code];
      const structured = hint ? { ...error.error, details: { ...error.error.details, hint } } : error.error;
      printError(structured);
      return exitCodeFor(error.code);
    }
    const message = error instanceof Error ? error.message : String(error);
    printError(oarError('internal_error', message));
    return EXIT.internal;
  }
}
