/**
 * What a command's output becomes: text or binary (never inlined), and the view the model gets by default — the
 * exit status, the first and the last lines — while the whole output is stored as an artifact.
 */

/** Lines and characters of each end of the output shown in the view. */
const VIEW_LINES = 40;
const VIEW_CHARS = 4_000;

/**
 * Binary when it holds a NUL byte or is not valid UTF-8 (a cut at the end of a kept prefix is forgiven: up to
 * three bytes of an unfinished character).
 */
export function isBinary(bytes: Buffer): boolean {
  if (bytes.includes(0)) return true;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(trimPartialCharacter(bytes));
    return false;
  } catch {
    return true;
  }
}

function trimPartialCharacter(bytes: Buffer): Buffer {
  for (let back = 1; back <= Math.min(3, bytes.length); back++) {
    const byte = bytes[bytes.length - back] as number;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: look further back for the lead byte
    if (byte < 0x80) return bytes;
    const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : 2;
    return back < need ? bytes.subarray(0, bytes.length - back) : bytes;
  }
  return bytes;
}

export interface ExitFacts {
  exitCode: number | null;
  signal: string | null;
  totalBytes: number;
  keptBytes: number;
}

/** The status line: `exit 0`, `exit 2`, `killed by SIGKILL`; with the output's size. */
export function statusLine(facts: ExitFacts): string {
  const status = facts.exitCode !== null ? `exit ${facts.exitCode}` : `killed by ${facts.signal ?? 'a signal'}`;
  const size = facts.totalBytes === 0 ? 'no output' : `${facts.totalBytes} bytes of output`;
  return `${status}, ${size}`;
}

/**
 * The model's default view of a text output: the status line, then the whole output when it is short, else its
 * head and tail with how much was left out between them. `cut` says whether anything was left out.
 */
export function outputView(text: string, facts: ExitFacts): { view: string; cut: boolean } {
  const head = statusLine(facts);
  const lines = text.split('\n');
  if (text.length <= 2 * VIEW_CHARS && lines.length <= 2 * VIEW_LINES && facts.totalBytes === facts.keptBytes) {
    return { view: text === '' ? head : `${head}\n${text}`, cut: false };
  }
  const first = clip(lines.slice(0, VIEW_LINES).join('\n'), 'head');
  const last = clip(lines.slice(-VIEW_LINES).join('\n'), 'tail');
  const omitted = Math.max(0, lines.length - 2 * VIEW_LINES);
  const dropped = facts.totalBytes - facts.keptBytes;
  const middle = `… ${omitted} lines left out; the full output is in the artifact …`;
  const tail = dropped > 0 ? `\n… ${dropped} more bytes were not kept (over the artifact size limit) …` : '';
  return { view: `${head}\n${first}\n${middle}\n${last}${tail}`, cut: true };
}

function clip(text: string, end: 'head' | 'tail'): string {
  if (text.length <= VIEW_CHARS) return text;
  return end === 'head' ? `${text.slice(0, VIEW_CHARS)}…` : `…${text.slice(-VIEW_CHARS)}`;
}

/** The sandbox's refusals, as commands report them on stderr: a write to a read-only place, a blocked connection. */
const VIOLATIONS: { kind: 'write_blocked' | 'network_blocked'; pattern: RegExp }[] = [
  { kind: 'write_blocked', pattern: /Read-only file system|EROFS/ },
  {
    kind: 'network_blocked',
    pattern: /Network is unreachable|ENETUNREACH|EAI_AGAIN|Temporary failure in name resolution|Could not resolve host/,
  },
];

/** One violation per kind the stderr lines show, with the first line that shows it. */
export function sandboxViolations(
  lines: readonly string[],
  network: boolean,
): { kind: 'write_blocked' | 'network_blocked'; evidence: string }[] {
  const found: { kind: 'write_blocked' | 'network_blocked'; evidence: string }[] = [];
  for (const { kind, pattern } of VIOLATIONS) {
    if (kind === 'network_blocked' && network) continue;
    const line = lines.find((candidate) => pattern.test(candidate));
    if (line !== undefined) found.push({ kind, evidence: line });
  }
  return found;
}
