import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { LineSplitter, Peer, PeerError, type WireError, wireError } from '@oar/runner-sdk';
import {
  closeChild,
  killProcessGroup,
  type ProcessSpec,
  type RunnerConnection,
  type RunnerExit,
  type RunnerTransport,
  STDERR_LIMIT,
} from '../transport.js';
import { LangbotConnection } from './connection.js';
import { Handshake, REGISTER_TIMEOUT_MS, REGISTRATION_CAPABILITY_ENV } from './handshake.js';
import { LangbotTranslator } from './translator.js';

/** The longest line read from a plugin's stdout: its frames are at most 16 KiB (larger ones come in chunks). */
export const MAX_LINE_BYTES = 1024 * 1024;

/**
 * A LangBot runner plugin as a child process speaking LangBot's plugin wire on stdio, behind the same
 * `RunnerConnection` as every runner: the host talks OAR's wire to a translator in this process (translator.ts),
 * which talks LangBot frames to the plugin. The plugin is started as LangBot's plugin runtime starts it (its own
 * process group, a one-use registration capability in its environment), registers itself, and is then listed and
 * run. On this wire a stdout line that is not a frame is the plugin's log (kept with its stderr), never a fault;
 * a frame that breaks the wire's bounds is. LangBot has no cancel frame: cancelling closes the connection, and the
 * process group is killed past the grace period.
 */
export function langbotTransport(spec: ProcessSpec): RunnerTransport {
  return {
    async connect(handler, limits) {
      const capability = randomBytes(24).toString('hex');
      const child = spawn(spec.command, spec.args, {
        cwd: spec.cwd,
        env: { ...spec.env, [REGISTRATION_CAPABILITY_ENV]: capability },
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      // A rolling tail, as for OAR's wire: a runner's last words matter most. Trimmed once it is twice the bound,
      // so a plugin flooding stdout with short non-frame lines costs amortized O(1) per line, never a copy of the
      // whole tail each (the host redacts the tail before it records it).
      let log = '';
      const record = (text: string) => {
        log += text.length > STDERR_LIMIT ? text.slice(-STDERR_LIMIT) : text;
        if (log.length > 2 * STDERR_LIMIT) log = log.slice(-STDERR_LIMIT);
      };
      let fault: WireError | undefined;
      let killed = false;
      const killGroup = () => {
        killed = true;
        killProcessGroup(child);
      };
      const onFault = (error: WireError) => {
        fault ??= error;
        record(`[oar] the plugin broke LangBot's wire: ${error.code}: ${error.message}\n`);
        killGroup();
      };
      const plugin = new LangbotConnection(
        (line) =>
          new Promise<void>((resolve, reject) => {
            if (!child.stdin || child.stdin.destroyed) {
              reject(new PeerError(wireError('runner_exited', 'the plugin closed its stdin')));
              return;
            }
            child.stdin.write(`${line}\n`, (error) => (error ? reject(error) : resolve()));
          }),
        (action, data, stream) => translator.fromPlugin(action, data, stream),
        (line) => record(`[stdout] ${line}\n`),
        onFault,
      );
      const handshake = new Handshake(plugin, capability);
      let ended = false;
      // Delivered on a later tick, as a pipe would: neither side runs inside the other's write.
      const hostPeer: Peer = new Peer(
        (line) => {
          if (!ended) setImmediate(() => translator.peer.receive(line));
        },
        handler,
        limits,
        onFault,
      );
      const translator: LangbotTranslator = new LangbotTranslator(
        plugin,
        handshake,
        (line) => {
          if (!ended) setImmediate(() => hostPeer.receive(line));
        },
        limits,
        onFault,
      );
      const registerTimer = setTimeout(() => {
        if (!handshake.registered) {
          handshake.fail(
            new PeerError(
              wireError('runner_unavailable', `the plugin did not register within ${REGISTER_TIMEOUT_MS} ms`),
            ),
          );
        }
      }, REGISTER_TIMEOUT_MS);
      registerTimer.unref();
      const exited = new Promise<RunnerExit>((resolve) => {
        const end = (exit: RunnerExit) => {
          ended = true;
          clearTimeout(registerTimer);
          const error =
            fault ?? wireError('runner_exited', `the runner exited (code ${exit.code}, signal ${exit.signal})`);
          plugin.close(error);
          handshake.fail(new PeerError(error));
          translator.peer.close(error);
          hostPeer.close(error);
          resolve(exit);
        };
        child.once('exit', (code, signal) => end({ code, signal, killed, ...(fault ? { fault } : {}) }));
        child.once('error', (error) => {
          fault ??= wireError('runner_spawn_failed', error.message);
          end({ code: null, signal: null, killed, fault });
        });
      });
      child.stdin?.on('error', () => undefined);
      const splitter = new LineSplitter(
        MAX_LINE_BYTES,
        (line) => plugin.receive(line),
        () => plugin.fault(wireError('frame_too_large', `a line of more than ${MAX_LINE_BYTES} bytes`)),
      );
      child.stdout?.setEncoding('utf8');
      child.stdout?.on('data', (chunk: string) => splitter.push(chunk));
      child.stderr?.setEncoding('utf8');
      child.stderr?.on('data', (chunk: string) => record(chunk));
      const connection: RunnerConnection = {
        peer: hostPeer,
        ...(child.pid !== undefined ? { pid: child.pid } : {}),
        exited,
        stderr: () => log.slice(-STDERR_LIMIT),
        notes: () => translator.notes,
        // A plugin in production mode exits when its connection closes (stdin at EOF).
        close: (graceMs = 2_000) => closeChild(child, exited, killGroup, graceMs),
      };
      return connection;
    },
  };
}
