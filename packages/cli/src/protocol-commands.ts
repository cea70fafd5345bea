import type { CatalogInput, ParseOutcome } from '@oar/protocol';
import type { Command } from 'commander';

/** What the commands below need when they run; imported then, not when `oar --help` lists them. */
async function load() {
  const [protocol, io] = await Promise.all([import('@oar/protocol'), import('./io.js')]);
  return { ...protocol, ...io };
}

interface CheckOptions {
  carrier: string;
  catalog?: string;
  history?: string;
  allowPlain?: boolean;
  validate: boolean;
}

async function check(file: string | undefined, options: CheckOptions): Promise<number> {
  const {
    CatalogSchema,
    INPUT_LIMITS,
    jsonTextTooDeep,
    oarError,
    parseAssistantText,
    parseToolCall,
    printJson,
    readInput,
    readJsonFile,
    redactedForOutput,
    UsageError,
  } = await load();
  if (options.carrier !== 'tool' && options.carrier !== 'text') {
    throw new UsageError(oarError('invalid_option', `--carrier must be "tool" or "text", not "${options.carrier}"`));
  }
  let catalog: CatalogInput = {};
  if (options.catalog !== undefined) {
    const parsed = CatalogSchema.safeParse(await readJsonFile(options.catalog, 'catalog', INPUT_LIMITS.catalog));
    if (!parsed.success) {
      throw new UsageError(
        oarError('invalid_catalog', `catalog ${options.catalog} does not match {tools, agents}`, {
          details: { issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })) },
        }),
      );
    }
    catalog = parsed.data;
  }
  const completed = (options.history ?? '')
    .split(',')
    .map((id) => id.trim())
    .filter((id) => id !== '');
  const parseOptions = {
    catalog,
    history: { completedActionIds: completed, usedActionIds: completed },
    ...(options.allowPlain ? { allowPlainText: true } : {}),
    ...(options.validate === false ? { validate: false } : {}),
  };
  const text = await readInput(file, INPUT_LIMITS.declaration, 'model output');
  let outcome: ParseOutcome;
  if (options.carrier === 'text') {
    outcome = parseAssistantText(text, parseOptions);
  } else {
    // A provider may hand over the arguments string as-is; the parser reports (or repairs) its JSON, and reports
    // nesting past its depth limit, which is checked here before JSON.parse builds the value.
    let value: unknown = text;
    if (!jsonTextTooDeep(text)) {
      try {
        value = JSON.parse(text);
      } catch {
        value = text;
      }
    }
    outcome = parseToolCall(value, parseOptions);
  }
  // The output repeats the input (the declaration, the errors quote it): a pasted key is printed redacted, like
  // everything else the CLI prints (docs/security.md). The check itself ran on the input as given.
  printJson(
    redactedForOutput({
      ok: outcome.ok,
      ...(outcome.declaration ? { declaration: outcome.declaration } : {}),
      ...(outcome.errors.length > 0 ? { errors: outcome.errors } : {}),
      ...(outcome.repairs.length > 0 ? { repairs: outcome.repairs } : {}),
      recovered: outcome.recovered,
    }),
  );
  return outcome.ok ? 0 : 1;
}

async function transcript(file: string, options: { mode?: string; budget?: string }): Promise<number> {
  const {
    INPUT_LIMITS,
    oarError,
    readJsonFile,
    redactedForOutput,
    renderTranscript,
    TranscriptInputSchema,
    UsageError,
  } = await load();
  const parsed = TranscriptInputSchema.safeParse(await readJsonFile(file, 'transcript input', INPUT_LIMITS.transcript));
  if (!parsed.success) {
    throw new UsageError(
      oarError('invalid_transcript_input', `${file} is not a transcript input (see docs/protocol.md)`, {
        details: { issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })) },
      }),
    );
  }
  const mode = options.mode ?? 'hybrid';
  if (mode !== 'full' && mode !== 'compressed' && mode !== 'hybrid') {
    throw new UsageError(oarError('invalid_option', `--mode must be full, compressed or hybrid, not "${mode}"`));
  }
  const budget = options.budget === undefined ? undefined : Number(options.budget);
  if (budget !== undefined && (!Number.isInteger(budget) || budget <= 0)) {
    throw new UsageError(oarError('invalid_option', `--budget must be a positive integer, not "${options.budget}"`));
  }
  const rendered = renderTranscript(parsed.data, { mode, ...(budget !== undefined ? { budgetTokens: budget } : {}) });
  const text = redactedForOutput(rendered.text);
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  return 0;
}

export function registerProtocolCommands(program: Command, setExit: (code: number) => void): void {
  const protocol = program.command('protocol').description('check model output and render transcripts');
  protocol
    .command('check')
    .description(
      'parse, repair, normalize and validate one model output; prints {ok, declaration?, errors?, repairs?, recovered}',
    )
    .argument('[file]', 'input file, or - for standard input', '-')
    .option(
      '--carrier <carrier>',
      'tool: AgentProtocolOutput arguments or native call(s); text: raw assistant text',
      'tool',
    )
    .option(
      '--catalog <file>',
      'JSON catalog {tools:[{name, description, inputSchema}], agents:[{name, description, capabilities}]}',
    )
    .option('--history <ids>', 'comma-separated ids of actions completed earlier in the thread')
    .option('--allow-plain', 'text carrier: a message with no block and no tool call is the final answer')
    .option('--no-validate', 'skip graph validation against the catalog (recovered requests are always validated)')
    .action(async (file: string | undefined, options: CheckOptions) => setExit(await check(file, options)));
  protocol
    .command('transcript')
    .description('render the Markdown transcript the model sees from a JSON transcript input')
    .argument('<file>', 'transcript input JSON (see docs/protocol.md), or - for standard input')
    .option('--mode <mode>', 'replay mode: full, compressed or hybrid', 'hybrid')
    .option('--budget <tokens>', 'token budget; older turns degrade first')
    .action(async (file: string, options: { mode?: string; budget?: string }) =>
      setExit(await transcript(file, options)),
    );
}
