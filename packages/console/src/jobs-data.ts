import { useEffect, useRef, useState } from 'preact/hooks';
import { get } from './api';
import { openStream, type StreamStatus } from './stream';
import type { JobSummary } from './types';

/**
 * Jobs, live and cheap: a job's facts are events of its session, so the workspace feed (`GET /v1/events`, one
 * `session.changed` per changed session, coalesced by the server) says when to read a job again — the read is one
 * JSON request, throttled. Without that feed (an older server) the console polls, and only while a job runs.
 */

export interface Live<T> {
  data?: T;
  error?: unknown;
  conn?: StreamStatus;
  /** Read it again now (after an action, or "Try again"). */
  reload(): void;
  /** Take a fresher copy (the answer of cancel or retry) without a request. */
  set(data: T): void;
}

export interface LiveOptions<T> {
  /** Whether a change of this session can change the data (`data` is what is shown, if anything). */
  watches(sessionId: string, data: T | undefined): boolean;
  /** Whether anything may still change by itself: without the feed, polling stops once nothing is running. */
  running(data: T): boolean;
  /** The shortest time between two reads while changes keep coming. */
  throttleMs?: number;
  pollMs?: number;
  /**
   * When the data changes by itself, with no event to say so (a schedule's next cron time): epoch ms to read it
   * again at (never sooner than `throttleMs`). A moment already past is read again with a backoff (1 s doubling up
   * to 30 s): no worker may be firing.
   */
  wakeAt?(data: T): number | undefined;
}

export function useLiveJson<T>(path: string, options: LiveOptions<T>): Live<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [conn, setConn] = useState<StreamStatus | undefined>(undefined);
  const current = useRef<T | undefined>(undefined);
  // Bumped by `set`: a read that started before is older than the answer just shown, and is read again instead.
  const generation = useRef(0);
  const reload = useRef<() => void>(() => undefined);
  const arm = useRef<(data: T) => void>(() => undefined);
  const opts = useRef(options);
  opts.current = options;

  useEffect(() => {
    let stopped = false;
    let inFlight = false;
    let again = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let poll: ReturnType<typeof setInterval> | undefined;
    let wake: ReturnType<typeof setTimeout> | undefined;
    let late = 0;
    current.current = undefined;
    setData(undefined);
    setError(undefined);
    const read = async () => {
      if (inFlight) {
        again = true;
        return;
      }
      inFlight = true;
      const started = generation.current;
      try {
        const next = await get<T>(path);
        if (stopped) return;
        if (started !== generation.current) {
          again = true;
          return;
        }
        current.current = next;
        setData(next);
        setError(undefined);
        arm.current(next);
      } catch (e) {
        if (!stopped) setError(e);
      } finally {
        inFlight = false;
        if (again && !stopped) {
          again = false;
          void read();
        }
      }
    };
    // Throttled, not debounced: a job whose items never pause is still read again every `throttleMs`.
    const soon = () => {
      timer ??= setTimeout(() => {
        timer = undefined;
        void read();
      }, opts.current.throttleMs ?? 300);
    };
    reload.current = () => void read();
    arm.current = (next: T) => {
      if (wake) clearTimeout(wake);
      wake = undefined;
      const at = opts.current.wakeAt?.(next);
      if (at === undefined || stopped) return;
      const wait = at - Date.now();
      late = wait > 0 ? 0 : late + 1;
      const delay =
        wait > 0 ? Math.max(wait, opts.current.throttleMs ?? 300) : Math.min(1000 * 2 ** (late - 1), 30_000);
      wake = setTimeout(() => {
        wake = undefined;
        void read();
      }, delay);
    };
    void read();
    const stream = openStream('/v1/events', {
      onMessage(type, message) {
        // `sessions` opens every (re)connection: whatever happened while disconnected is read again.
        if (type === 'sessions') soon();
        else if (type === 'session.changed') {
          const id = (message as { sessionId?: string } | undefined)?.sessionId;
          if (id && opts.current.watches(id, current.current)) soon();
        }
      },
      onState: setConn,
      onUnavailable() {
        setConn(undefined);
        poll = setInterval(() => {
          if (!current.current || opts.current.running(current.current)) void read();
        }, opts.current.pollMs ?? 2000);
      },
    });
    return () => {
      stopped = true;
      stream.close();
      if (timer) clearTimeout(timer);
      if (poll) clearInterval(poll);
      if (wake) clearTimeout(wake);
    };
  }, [path]);

  return {
    data,
    error,
    conn,
    reload: () => reload.current(),
    set(next: T) {
      generation.current++;
      current.current = next;
      setData(next);
      setError(undefined);
      arm.current(next);
    },
  };
}

/**
 * The jobs of one session (`GET /v1/jobs?sessionId=`), read again when a `job.*` event of that session arrives on
 * the session's own stream (`jobEvent`: the sequence of the latest) — at most twice a second, and no second stream
 * for the session page.
 */
export function useSessionJobs(sessionId: string, jobEvent: number): { jobs?: JobSummary[]; error?: unknown } {
  const [jobs, setJobs] = useState<JobSummary[] | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [tick, setTick] = useState(0);
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => {
    if (jobEvent === 0 || timer.current) return;
    timer.current = setTimeout(() => {
      timer.current = undefined;
      setTick((n) => n + 1);
    }, 500);
  }, [jobEvent]);
  useEffect(
    () => () => {
      if (timer.current) clearTimeout(timer.current);
    },
    [],
  );
  useEffect(() => {
    let stopped = false;
    get<{ jobs: JobSummary[] }>(`/v1/jobs?sessionId=${encodeURIComponent(sessionId)}`)
      .then((r) => {
        if (stopped) return;
        setJobs(r.jobs);
        setError(undefined);
      })
      .catch((e) => !stopped && setError(e));
    return () => {
      stopped = true;
    };
  }, [sessionId, tick]);
  return { jobs, error };
}
