import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The repository stands alone: a clone placed in any folder needs nothing beside it. This test reads every file of
 * the repository (`git ls-files`, with new files not yet committed but not ignored) and fails when one names a path
 * outside it — a sibling folder, an absolute path of the machine the repository was written on, a relative path or
 * Markdown link that climbs above the root — and when a Markdown link of README.md or docs/ points at a file or a
 * heading that does not exist.
 */

const ROOT = path.resolve(fileURLToPath(new URL('../../../', import.meta.url)));

/** The files of the repository: what git tracks, plus new files it does not ignore. */
function repositoryFiles(): string[] {
  const listed = gitFiles() ?? walkedFiles();
  // Generated listings whose paths are not the file's own are left out: the lockfile, and the import rules' known
  // violations (each names an import as written in the source file that makes it, relative to that file).
  return [...new Set(listed)]
    .filter((file) => file !== '' && !file.endsWith('package-lock.json'))
    .filter((file) => file !== '.dependency-cruiser-known-violations.json')
    .filter((file) => existsSync(path.join(ROOT, file)) && statSync(path.join(ROOT, file)).isFile())
    .sort();
}

function gitFiles(): string[] | undefined {
  try {
    const listed = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], {
      cwd: ROOT,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return listed.split('\0');
  } catch {
    return undefined; // an exported tree without .git: walk it instead
  }
}

/** Without git: every file, less what .gitignore names (its simple patterns: names, paths, `*`, a trailing `/`). */
function walkedFiles(): string[] {
  const ignored = readFileSync(path.join(ROOT, '.gitignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const pattern = line.replace(/\/$/, '');
      const glob = pattern
        .replace(/^\//, '')
        .split('*')
        .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
        .join('[^/]*');
      return new RegExp(pattern.includes('/') ? `^${glob}$` : `(^|/)${glob}$`);
    });
  const walk = (dir: string): string[] =>
    readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
      const relative = dir === '' ? entry.name : `${dir}/${entry.name}`;
      if (entry.name === '.git' || ignored.some((pattern) => pattern.test(relative))) return [];
      return entry.isDirectory() ? walk(relative) : [relative];
    });
  return walk('');
}

/** Text files only: a NUL byte in the first 8 KiB marks a binary file (the rule git itself uses). */
function readText(file: string): string | undefined {
  const bytes = readFileSync(path.join(ROOT, file));
  if (bytes.subarray(0, 8192).includes(0)) return undefined;
  return bytes.toString('utf8');
}

const files = repositoryFiles();
const texts = new Map<string, string>();
for (const file of files) {
  const text = readText(file);
  if (text !== undefined) texts.set(file, text);
}

const lineOf = (text: string, index: number) => text.slice(0, index).split('\n').length;
const inside = (absolute: string) => absolute === ROOT || absolute.startsWith(ROOT + path.sep);

// Built from parts so that this file does not name them itself.
const SIBLING = new RegExp(`\\.\\./${'shared'}\\b`, 'g');
// An absolute path under the folder the repository was developed in; `/home/runner/work/app` (a CI path inside a
// golden file) is not one: the character before the slash must not belong to a path.
const HOST_PATH = new RegExp(`(?<![\\w.~/-])/${'work'}/`, 'g');

const SOURCE = /\.(?:[cm]?[jt]sx?|json|ya?ml|sh|py|html|css)$/;
/** A string literal that starts with `../`, up to its end or to the first interpolation. */
const RELATIVE_LITERAL = /(['"`])(\.\.\/(?:[^'"`$\n\\]|\$(?!\{))*)/g;

/** Markdown prose with fenced code blocks blanked out (their lines kept, so line numbers stay right). */
function prose(markdown: string): string {
  let fenced: string | undefined;
  return markdown
    .split('\n')
    .map((line) => {
      const fence = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
      if (fence && (fenced === undefined || fence.startsWith(fenced))) {
        fenced = fenced === undefined ? fence : undefined;
        return '';
      }
      return fenced === undefined ? line : '';
    })
    .join('\n');
}

interface Link {
  target: string;
  line: number;
}

/** Inline links and images `[text](target "title")`, and reference definitions `[id]: target`, outside code. */
function markdownLinks(markdown: string): Link[] {
  const text = prose(markdown).replace(/`[^`\n]*`/g, (span) => ' '.repeat(span.length));
  const links: Link[] = [];
  for (const match of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    links.push({ target: match[1]!, line: lineOf(text, match.index) });
  }
  for (const match of text.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)) {
    links.push({ target: match[1]!, line: lineOf(text, match.index) });
  }
  return links;
}

const external = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//');

/** GitHub's heading ids: the heading's text, lower-cased, punctuation dropped, spaces as hyphens, repeats numbered. */
function headingIds(markdown: string): Set<string> {
  const ids = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of prose(markdown).split('\n')) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const textOnly = heading
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .trim();
    const base = textOnly
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    ids.add(count === 0 ? base : `${base}-${count}`);
  }
  for (const match of markdown.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) ids.add(match[1]!);
  return ids;
}

const markdownFiles = [...texts.keys()].filter((file) => file.endsWith('.md'));
const documentation = markdownFiles.filter((file) => file === 'README.md' || file.startsWith('docs/'));

describe('the repository stands alone', () => {
  it('reads the repository through git (the test would pass vacuously on an empty list)', () => {
    expect(files).toContain('README.md');
    expect(files).toContain('conformance/agentruntime/schemas/agentruntime-event.schema.json');
  });

  it('no file names the folder beside the repository or a path of the machine it was written on', () => {
    const found: string[] = [];
    for (const [file, text] of texts) {
      for (const pattern of [SIBLING, HOST_PATH]) {
        for (const match of text.matchAll(pattern)) found.push(`${file}:${lineOf(text, match.index)}: ${match[0]}`);
      }
    }
    expect(found).toEqual([]);
  });

  it('no relative path in source climbs out of the repository', () => {
    const escaping: string[] = [];
    for (const [file, text] of texts) {
      if (!SOURCE.test(file)) continue;
      for (const match of text.matchAll(RELATIVE_LITERAL)) {
        const resolved = path.resolve(ROOT, path.dirname(file), match[2]!);
        if (!inside(resolved)) escaping.push(`${file}:${lineOf(text, match.index)}: ${match[2]}`);
      }
    }
    expect(escaping).toEqual([]);
  });

  it('every relative Markdown link stays inside the repository and points at a file that exists', () => {
    const broken: string[] = [];
    for (const file of markdownFiles) {
      for (const { target, line } of markdownLinks(texts.get(file)!)) {
        if (external(target) || target.startsWith('#')) continue;
        const linked = decodeURIComponent(target.split('#')[0]!.split('?')[0]!);
        const resolved = linked.startsWith('/')
          ? path.join(ROOT, linked)
          : path.resolve(ROOT, path.dirname(file), linked);
        if (!inside(resolved)) broken.push(`${file}:${line}: ${target} (outside the repository)`);
        else if (!existsSync(resolved)) broken.push(`${file}:${line}: ${target} (no such file)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("every #anchor in README.md and docs/ names a heading of the page it points at (GitHub's ids)", () => {
    const broken: string[] = [];
    const ids = new Map<string, Set<string>>();
    const idsOf = (file: string) => {
      let known = ids.get(file);
      if (!known) {
        known = headingIds(readFileSync(file, 'utf8'));
        ids.set(file, known);
      }
      return known;
    };
    for (const file of documentation) {
      for (const { target, line } of markdownLinks(texts.get(file)!)) {
        const hash = target.indexOf('#');
        if (external(target) || hash < 0) continue;
        const page = target.slice(0, hash);
        const resolved = page === '' ? path.join(ROOT, file) : path.resolve(ROOT, path.dirname(file), page);
        if (!resolved.endsWith('.md') || !existsSync(resolved)) continue; // the file check above reports it
        const anchor = decodeURIComponent(target.slice(hash + 1));
        if (!idsOf(resolved).has(anchor)) broken.push(`${file}:${line}: ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("GitHub's heading ids, as this test computes them", () => {
    const ids = headingIds(
      [
        '# The engine',
        '## A protocol turn, as events',
        '### `oar run` — a turn',
        '## Errors',
        '## Errors',
        '```',
        '# not a heading',
        '```',
        '## [docs/x.md](docs/x.md) and **bold** _x_y',
      ].join('\n'),
    );
    expect([...ids]).toEqual([
      'the-engine',
      'a-protocol-turn-as-events',
      'oar-run--a-turn',
      'errors',
      'errors-1',
      'docsxmd-and-bold-_x_y',
    ]);
  });
});
