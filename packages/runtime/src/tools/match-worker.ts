import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { ToolError } from '../kernel/errors.js';
import { abortedError } from './errors.js';

/**
 * Pattern matching on model-supplied patterns runs in a worker thread that the calling tool terminates when its
 * signal aborts (interrupt or timeout).
 *
 * Why a worker and not "RE2 is linear, so the per-file abort checks suffice": linear is in (pattern size × text
 * length), and both are large. A 1,000-character RE2 pattern such as `a{0,1000}` repeated twelve times took 14 s
 * on one 20 KB line (measured with re2js), so on a 1 MiB file — grep's limit — it would run for minutes inside one
 * synchronous call. Nothing on the event loop (the tool timeout's timer, SIGINT, `oar interrupt`, other sessions)
 * gets a turn until it returns; only a separate thread can be stopped mid-match. The worker's code is a small
 * CommonJS string (`eval: true`) that loads re2js by path, so it runs the same from `dist/` and from the TypeScript
 * sources under the test runner.
 *
 * Idle workers are kept (unref'd, at most MAX_IDLE) so a call does not pay the thread start-up (~0.1 s) each time;
 * a worker whose call was aborted is terminated, never reused.
 */

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { RE2JS } = require(workerData.re2js);
let programs = [];
parentPort.on('message', (message) => {
  const { id, op } = message;
  if (op === 'compile') {
    const compiled = [];
    for (let index = 0; index < message.programs.length; index += 1) {
      const program = message.programs[index];
      try {
        compiled.push(RE2JS.compile(program.source, program.caseInsensitive ? RE2JS.CASE_INSENSITIVE : 0));
      } catch (error) {
        parentPort.postMessage({ id, error: { index, message: String(error && error.message || error) } });
        return;
      }
    }
    programs = compiled;
    parentPort.postMessage({ id, result: true });
  } else if (op === 'full') {
    const re = programs[message.program];
    parentPort.postMessage({ id, result: message.texts.map((text) => re.matcher(text).matches()) });
  } else if (op === 'lines') {
    const re = programs[message.program];
    const lines = message.text.split(/\\r?\\n/);
    const hits = [];
    for (let index = 0; index < lines.length && hits.length < message.limit; index += 1) {
      const line = lines[index];
      if (re.matcher(line).find()) hits.push({ line: index, text: line.slice(0, message.maxChars), length: line.length });
    }
    parentPort.postMessage({ id, result: hits });
  }
});
`;

const MAX_IDLE = 2;
const idle: Worker[] = [];
let re2jsPath: string | undefined;

export interface MatchProgram {
  /** RE2 source. */
  source: string;
  caseInsensitive?: boolean;
  /** Names the pattern in errors, e.g. "regular expression" or "glob pattern". */
  what: string;
  /** The pattern as the model wrote it, for error details. */
  pattern: string;
}

export interface LineHit {
  /** 0-based line index. */
  line: number;
  /** The line's first `maxChars` characters. */
  text: string;
  /** The line's full length. */
  length: number;
}

interface Reply {
  id: number;
  result?: unknown;
  error?: { index: number; message: string };
}

/** One tool call's matcher: programs compiled in a worker; every request is abandoned (worker killed) on abort. */
export class PatternMatcher {
  private nextId = 0;
  private dead = false;

  private constructor(
    private readonly worker: Worker,
    private readonly signal: AbortSignal,
  ) {}

  /** Start (or reuse) a worker and compile `programs`; an RE2 syntax error is `invalid_pattern`. */
  static async start(programs: MatchProgram[], signal: AbortSignal): Promise<PatternMatcher> {
    if (signal.aborted) throw abortedError();
    const matcher = new PatternMatcher(takeWorker(), signal);
    try {
      await matcher.request({
        op: 'compile',
        programs: programs.map((p) => ({ source: p.source, caseInsensitive: p.caseInsensitive ?? false })),
      });
    } catch (error) {
      const failed = (error as { compileError?: Reply['error'] }).compileError;
      const program = failed ? programs[failed.index] : undefined;
      if (!failed || !program) throw error;
      matcher.close();
      throw new ToolError(
        'invalid_pattern',
        `Invalid ${program.what} (RE2 syntax: no lookaround or backreferences): ${failed.message}`,
        {
          details: { pattern: program.pattern },
        },
      );
    }
    return matcher;
  }

  /** Whole-string matches of program `program` against each text. */
  async fullMatches(program: number, texts: string[]): Promise<boolean[]> {
    if (texts.length === 0) return [];
    return (await this.request({ op: 'full', program, texts })) as boolean[];
  }

  /** The lines of `text` (split at \n or \r\n) that program `program` finds a match in, at most `limit`. */
  async matchingLines(program: number, text: string, limit: number, maxChars: number): Promise<LineHit[]> {
    return (await this.request({ op: 'lines', program, text, limit, maxChars })) as LineHit[];
  }

  /** Give the worker back for reuse (or end it). Safe to call more than once. */
  close(): void {
    if (this.dead) return;
    this.dead = true;
    if (idle.length < MAX_IDLE) {
      this.worker.unref();
      idle.push(this.worker);
    } else void this.worker.terminate();
  }

  private kill(): void {
    if (this.dead) return;
    this.dead = true;
    void this.worker.terminate();
  }

  private request(message: Record<string, unknown>): Promise<unknown> {
    if (this.signal.aborted) {
      this.kill();
      return Promise.reject(abortedError());
    }
    if (this.dead) return Promise.reject(workerFailed('the matcher was closed'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const cleanup = () => {
        this.worker.off('message', onMessage);
        this.worker.off('error', onError);
        this.worker.off('exit', onExit);
        this.signal.removeEventListener('abort', onAbort);
      };
      const onMessage = (reply: Reply) => {
        if (reply.id !== id) return;
        cleanup();
        if (reply.error) reject(Object.assign(workerFailed(reply.error.message), { compileError: reply.error }));
        else resolve(reply.result);
      };
      const onError = (error: Error) => {
        cleanup();
        this.kill();
        reject(workerFailed(error.message));
      };
      const onExit = () => {
        cleanup();
        this.dead = true;
        reject(workerFailed('the matching thread exited'));
      };
      // The point of the worker: an abort does not wait for the match, it ends the thread running it.
      const onAbort = () => {
        cleanup();
        this.kill();
        reject(abortedError());
      };
      this.worker.on('message', onMessage);
      this.worker.once('error', onError);
      this.worker.once('exit', onExit);
      this.signal.addEventListener('abort', onAbort, { once: true });
      this.worker.postMessage({ id, ...message });
    });
  }
}

function takeWorker(): Worker {
  const reused = idle.pop();
  if (reused) {
    reused.ref();
    return reused;
  }
  re2jsPath ??= createRequire(import.meta.url).resolve('re2js');
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { re2js: re2jsPath } });
  // Without a listener an 'error' of an idle worker would be an uncaught exception; a busy call has its own.
  worker.on('error', () => undefined);
  // An idle worker that dies (it should not) must not be handed out again.
  worker.once('exit', () => {
    const index = idle.indexOf(worker);
    if (index >= 0) idle.splice(index, 1);
  });
  return worker;
}

function workerFailed(message: string): ToolError {
  return new ToolError('pattern_worker_failed', `Pattern matching failed: ${message}`, { retryable: true });
}
