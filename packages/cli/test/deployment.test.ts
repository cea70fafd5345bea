import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { OarConfigSchema } from '@oar/runtime';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { oarIn, repoRoot } from './cli-helpers.js';

/**
 * The deployment guide and its Compose example (docs/deployment.md, examples/deployment/) must describe the real
 * `oar`: no Docker engine runs here, so the Compose file is parsed and checked, and every `oar` command line in it
 * and in the guide may use only commands and options the built binary's `--help` prints. A renamed or removed
 * option fails this test instead of the first user who copies the line.
 */

const DOC = join(repoRoot, 'docs/deployment.md');
const EXAMPLE = join(repoRoot, 'examples/deployment');
const COMPOSE = join(EXAMPLE, 'compose.yaml');

interface Help {
  options: Set<string>;
  commands: Set<string>;
}

const helps = new Map<string, Help>();

/** The options and subcommands `oar …path --help` lists (its "Options:" and "Commands:" sections). */
function help(path: string[]): Help {
  const key = path.join(' ');
  const known = helps.get(key);
  if (known) return known;
  const result = oarIn(repoRoot, [...path, '--help']);
  expect(result.code, `oar ${key} --help: ${result.stderr}`).toBe(0);
  const parsed: Help = { options: new Set(), commands: new Set() };
  let section: 'options' | 'commands' | undefined;
  for (const line of result.stdout.split('\n')) {
    if (/^Options:/.test(line)) section = 'options';
    else if (/^Commands:/.test(line)) section = 'commands';
    else if (/^\S/.test(line)) section = undefined;
    // An entry starts two spaces in; deeper lines continue the description of the one above.
    const option = /^ {2}(?:-\w, )?(--[a-z][a-z0-9-]*)/.exec(line)?.[1];
    const command = /^ {2}([a-z][a-z-]*)/.exec(line)?.[1];
    if (section === 'options' && option) parsed.options.add(option);
    if (section === 'commands' && command) parsed.commands.add(command);
  }
  helps.set(key, parsed);
  return parsed;
}

/** One `oar` command line: the words after `oar` up to the end of the shell command. */
function check(words: string[], where: string): void {
  const rest = [...words];
  const path: string[] = [];
  const top = help([]);
  const first = rest.shift();
  expect(top.commands, `${where}: "oar ${words.join(' ')}" names a command of oar --help`).toContain(first);
  path.push(first as string);
  // Nested commands (`oar keys create`): descend while the next word is a subcommand of the one so far.
  while (rest[0] && help(path).commands.has(rest[0])) path.push(rest.shift() as string);
  const options = help(path).options;
  for (const word of rest) {
    if (!word.startsWith('--')) continue;
    const option = word.split('=')[0] as string;
    expect(options, `${where}: "oar ${words.join(' ')}": oar ${path.join(' ')} --help lists ${option}`).toContain(
      option,
    );
  }
}

/** `oar` command lines in shell text: quoted arguments become one word, a comment or `&&` ends the command. */
function commandsIn(text: string): string[][] {
  const found: string[][] = [];
  const words = text.replace(/'[^']*'|"[^"]*"/g, 'ARG').split(/\s+/);
  for (let i = 0; i < words.length; i++) {
    const word = words[i] as string;
    if (word !== 'oar' && !word.endsWith('/.bin/oar')) continue;
    const command: string[] = [];
    for (let j = i + 1; j < words.length; j++) {
      const next = words[j] as string;
      if (/^(#|&&|\|\||\||;)/.test(next) || next === '') break;
      command.push(next.replace(/[;)]+$/, ''));
    }
    // "the `oar` binary" in prose names no command.
    if (command.length > 0 && /^[a-z]/.test(command[0] as string)) found.push(command);
  }
  return found;
}

/** Every `oar` command line of a Markdown file: the lines of its fenced blocks and its inline code spans. */
function markdownCommands(markdown: string): { words: string[]; where: string }[] {
  const out: { words: string[]; where: string }[] = [];
  const lines = markdown.split('\n');
  let fence: string | undefined;
  lines.forEach((line, index) => {
    const where = `docs/deployment.md:${index + 1}`;
    const opening = /^```(\w*)/.exec(line);
    if (opening) {
      fence = fence === undefined ? (opening[1] ?? '') : undefined;
      return;
    }
    if (fence !== undefined) {
      // SQL and JSON hold table and field names, not commands.
      if (fence !== 'sql' && fence !== 'jsonc' && fence !== 'json') {
        for (const words of commandsIn(line)) out.push({ words, where });
      }
      return;
    }
    for (const span of line.match(/`[^`]+`/g) ?? []) {
      for (const words of commandsIn(span.slice(1, -1))) out.push({ words, where });
    }
  });
  return out;
}

describe('docs/deployment.md and examples/deployment/compose.yaml', () => {
  const compose = parse(readFileSync(COMPOSE, 'utf8'), { merge: true }) as {
    services: Record<
      string,
      {
        image?: string;
        command?: string[];
        environment?: Record<string, string>;
        depends_on?: Record<string, { condition: string }>;
        init?: boolean;
        stop_grace_period?: string;
        volumes?: string[];
        healthcheck?: { test: unknown[] };
      }
    >;
  };
  const services = compose.services;
  const oarServices = Object.entries(services).filter(([, s]) => commandsIn((s.command ?? []).join(' ')).length > 0);

  it('the Compose file starts PostgreSQL, an API node and two workers, each oar service on PostgreSQL', () => {
    expect(services.postgres?.image).toMatch(/^postgres:/);
    const commandOf = (name: string) => commandsIn((services[name]?.command ?? []).join(' '))[0] ?? [];
    expect(commandOf('api').slice(0, 2)).toEqual(['serve', '--no-worker']);
    const workers = oarServices.filter(([, s]) => commandsIn((s.command ?? []).join(' '))[0]?.[0] === 'worker');
    expect(workers.map(([name]) => name).sort()).toEqual(['worker-1', 'worker-2']);
    for (const [name, service] of oarServices) {
      expect(service.image, name).toMatch(/^node:20/);
      expect(service.environment?.OAR_STORE, name).toMatch(/^postgres:\/\/.+@postgres:5432\//);
      expect(service.depends_on?.postgres?.condition, name).toBe('service_healthy');
      expect(service.depends_on?.install?.condition, name).toBe('service_completed_successfully');
      // PID 1 must pass the stop's SIGTERM on to `oar` (a worker drains on it).
      expect(service.init, name).toBe(true);
      // The mounted checkout is this repository (the volume is relative to the Compose file).
      const mount = service.volumes?.find((v) => v.endsWith(':/oar'));
      expect(mount, name).toBeDefined();
      const root = resolve(EXAMPLE, (mount as string).split(':')[0] as string);
      expect(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).name, name).toBe('oar-workspace');
    }
    expect(services.install?.command).toEqual(['npm', 'ci', '--no-audit', '--no-fund']);
    expect(services.api?.environment?.OAR_ADMIN_KEY).toMatch(/^\$\{OAR_ADMIN_KEY:\?/);
    for (const item of services.api?.healthcheck?.test ?? []) expect(typeof item).toBe('string');
  });

  it('a worker is given longer to stop than its drain deadline', () => {
    for (const name of ['worker-1', 'worker-2']) {
      const service = services[name];
      const command = service?.command ?? [];
      const drain = Number(command[command.indexOf('--drain-seconds') + 1]);
      expect(drain, name).toBeGreaterThan(0);
      const grace = /^(\d+)s$/.exec(service?.stop_grace_period ?? '')?.[1];
      expect(Number(grace), `${name}: stop_grace_period`).toBeGreaterThan(drain);
    }
  });

  it("every oar service's config file is valid, and the model file it names exists", () => {
    for (const [name, service] of oarServices) {
      const command = service.command ?? [];
      const config = command[command.indexOf('--config') + 1] as string;
      // The working directory is the mounted checkout: the repository root here.
      const file = join(repoRoot, config);
      const parsed = OarConfigSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
      expect(parsed.model, name).toMatch(/^script:/);
      expect(existsSync(resolve(dirname(file), String(parsed.model).slice('script:'.length))), name).toBe(true);
    }
  });

  it('every oar command line of the Compose file uses only commands and options oar --help lists', () => {
    const lines = oarServices.flatMap(([name, s]) =>
      commandsIn((s.command ?? []).join(' ')).map((words) => ({ words, where: `compose.yaml ${name}` })),
    );
    expect(lines.length).toBe(3);
    for (const { words, where } of lines) check(words, where);
  }, 180_000);

  it('every oar command line of docs/deployment.md uses only commands and options oar --help lists', () => {
    const lines = markdownCommands(readFileSync(DOC, 'utf8'));
    // The guide shows at least the API node, the worker, run --detach and wait.
    const seen = new Set(lines.map((l) => l.words[0]));
    for (const command of ['serve', 'worker', 'run', 'wait']) expect(seen).toContain(command);
    for (const { words, where } of lines) check(words, where);
  }, 180_000);

  it("the guide's configuration examples are valid oar.config.json", () => {
    const blocks = [...readFileSync(DOC, 'utf8').matchAll(/```jsonc?\n([\s\S]*?)```/g)].map((m) => m[1] as string);
    expect(blocks.length).toBeGreaterThan(0);
    for (const block of blocks) {
      const json = block
        .split('\n')
        .filter((line) => !line.trim().startsWith('//'))
        .join('\n');
      expect(() => OarConfigSchema.parse(JSON.parse(json)), block).not.toThrow();
    }
  });

  it("README's documentation list links the guide", () => {
    expect(readFileSync(join(repoRoot, 'README.md'), 'utf8')).toContain(
      '\n- [docs/deployment.md](docs/deployment.md) — ',
    );
  });
});
