import type { Command } from 'commander';

/**
 * `oar runners list`: the runners the configured packages provide (started and asked with LIST_AGENT_RUNNERS), a
 * summary of each manifest, and why anything was skipped (docs/runners.md).
 */
export function registerRunnerCommands(program: Command, setExit: (code: number) => void): void {
  const runners = program.command('runners').description('AgentRunner packages and the runners they provide');
  runners
    .command('list')
    .description(
      'discover the runners of runners.packages: manifest summaries, diagnostics for skipped ones, notes on read ones',
    )
    .option('--config <file>', 'config file (default ./oar.config.json when present)')
    .option('--json', 'print {runners, diagnostics} as JSON')
    .action(async (options: { config?: string; json?: boolean }) => {
      const [{ discoverRunners, loadConfig }, { printJson }] = await Promise.all([
        import('@oar/runtime'),
        import('./io.js'),
      ]);
      const { config, baseDir } = await loadConfig(options.config, process.cwd());
      // Directories and npm: entries are both resolved from the config file's directory.
      const found = await discoverRunners(config.runners.packages, process.env, { baseDir });
      if (options.json) {
        printJson(found);
        setExit(0);
        return;
      }
      if (found.runners.length === 0) process.stdout.write('no runners (configure runners.packages)\n');
      for (const { id, package: pkg, manifest } of found.runners) {
        const caps = Object.entries(manifest.capabilities)
          .filter(([, on]) => on === true)
          .map(([name]) => name);
        const perms = Object.entries(manifest.permissions)
          .filter(([, ops]) => Array.isArray(ops) && ops.length > 0)
          .map(([name, ops]) => `${name}:${(ops as string[]).join('+')}`);
        const label = manifest.label.en_US ?? Object.values(manifest.label)[0] ?? manifest.name;
        process.stdout.write(`${id}  ${label}\n`);
        process.stdout.write(`  package      ${pkg}\n`);
        process.stdout.write(`  capabilities ${caps.join(', ') || '-'}\n`);
        process.stdout.write(`  permissions  ${perms.join(', ') || '-'}\n`);
        process.stdout.write(`  context      ${manifest.context.ownership}, bootstrap ${manifest.context.bootstrap}\n`);
        const fields = manifest.config_schema.map((f) => `${f.name}${f.required ? '*' : ''}:${f.type}`);
        process.stdout.write(`  config       ${fields.join(', ') || '-'}\n`);
      }
      for (const d of found.diagnostics) {
        const where = `${d.package}${d.runner ? ` ${d.runner}` : ''}${d.pointer ? ` ${d.pointer}` : ''}`;
        // A note skipped nothing: the manifest was read differently from how it is written (a LangBot one).
        process.stdout.write(`${d.severity === 'note' ? 'note' : 'skipped'}: ${where}: ${d.reason}\n`);
      }
      setExit(0);
    });
}
