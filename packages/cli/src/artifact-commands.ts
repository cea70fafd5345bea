import type { Command } from 'commander';
import type { GlobalOptions } from './options.js';
import { globals } from './runtime-commands.js';

/**
 * `oar artifacts expire`: one sweep of the artifact retention policy (docs/reliability.md "Artifact retention") over
 * every session of the store — the policy of `retention.artifacts` in oar.config.json, flags overriding it. Long-lived
 * workers (`oar serve`, `oar worker`) run the same sweep periodically when the config has a policy.
 */

interface ExpireOptions extends GlobalOptions {
  maxAgeDays?: string;
  keep?: string[];
  batchSize?: string;
  dryRun?: boolean;
  json?: boolean;
}

async function expire(options: ExpireOptions): Promise<number> {
  const [{ oarError }, { ArtifactRetentionSchema, expireArtifacts, loadConfig }, io, { openForSessions }] =
    await Promise.all([
      import('@oar/protocol'),
      import('@oar/runtime'),
      import('./io.js'),
      import('./runtime-actions.js'),
    ]);
  const { config } = await loadConfig(options.config, process.cwd());
  const configured = config.retention.artifacts;
  const maxAgeDays = options.maxAgeDays === undefined ? configured?.maxAgeDays : Number(options.maxAgeDays);
  if (maxAgeDays === undefined) {
    throw new io.UsageError(
      oarError(
        'invalid_option',
        'no artifact retention policy: set retention.artifacts.maxAgeDays in oar.config.json or pass --max-age-days N',
      ),
    );
  }
  // Flags replace the configured values field by field; the result is checked as a config entry would be.
  const parsed = ArtifactRetentionSchema.safeParse({
    ...configured,
    maxAgeDays,
    ...(options.keep ? { keep: options.keep } : {}),
    ...(options.batchSize !== undefined ? { batchSize: Number(options.batchSize) } : {}),
  });
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
    const flag = (path: string) => `--${path.replace(/\..*$/, '').replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
    throw new io.UsageError(
      oarError('invalid_option', issues.map((i) => `${flag(i.path)}: ${i.message}`).join('; '), {
        details: { issues },
      }),
    );
  }
  const policy = parsed.data;
  const { runtime, store } = await openForSessions(options, false);
  try {
    const report = await expireArtifacts(runtime.log, policy, { dryRun: options.dryRun === true });
    if (options.json) {
      io.printJson({ ...report, policy: { maxAgeDays: policy.maxAgeDays, keep: policy.keep } });
      return 0;
    }
    const verb = report.dryRun ? 'would expire' : 'expired';
    const sessions = new Set(report.expired.map((a) => a.sessionId)).size;
    const lines = [
      `${verb} ${report.expired.length} artifact(s), ${report.bytes.toLocaleString('en-US')} bytes, in ${sessions} session(s): created before ${report.expiredBefore} (maxAgeDays ${policy.maxAgeDays}; keep ${policy.keep.length > 0 ? policy.keep.join(', ') : 'nothing by name'})`,
      ...report.expired.map(
        (a) => `  ${a.sessionId}  ${a.artifactId}  ${a.size} B  ${a.createdAt}${a.name ? `  ${a.name}` : ''}`,
      ),
    ];
    if (report.kept.length > 0) {
      lines.push(`kept ${report.kept.length} old artifact(s) still needed:`);
      for (const a of report.kept)
        lines.push(`  ${a.sessionId}  ${a.artifactId}  ${a.reason}${a.name ? `  ${a.name}` : ''}`);
    }
    if (!report.dryRun) lines.push(`recorded ${report.events} output.expired event(s)`);
    if (report.skipped.length > 0) {
      lines.push(`changed while swept, left for the next sweep: ${report.skipped.join(', ')}`);
    }
    if (report.more) lines.push(`the batch limit (${policy.batchSize}) was reached: run it again for the rest`);
    process.stdout.write(`${lines.join('\n')}\n`);
    return 0;
  } finally {
    await runtime.close();
    await store.close();
  }
}

export function registerArtifactCommands(program: Command, setExit: (code: number) => void): void {
  const artifacts = program.command('artifacts').description('stored outputs: retention');
  globals(artifacts.command('expire'))
    .description(
      'expire artifacts older than the retention policy (retention.artifacts): delete their content, keep a tombstone, record output.expired; what is still needed is kept',
    )
    .option(
      '--max-age-days <n>',
      'expire artifacts created more than N days ago (overrides retention.artifacts.maxAgeDays)',
    )
    .option(
      '--keep <pattern>',
      'an artifact name never expired, `*` matching anything (repeatable; replaces retention.artifacts.keep, default "file-version:*")',
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .option('--batch-size <n>', 'the most artifacts this sweep expires (default 1000)')
    .option('--dry-run', 'list what would expire and what is kept, change nothing')
    .option('--json', 'print the report as JSON')
    .action(async (options: ExpireOptions) => setExit(await expire(options)));
}
