import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, get, getKey, setKey, whenUnauthorized } from './api';
import { InboxScreen } from './inbox';
import { JobScreen } from './job';
import { JobsScreen } from './jobs';
import { ScheduleScreen } from './schedule';
import { SchedulesScreen } from './schedules';
import { SessionScreen } from './session';
import { SessionsScreen } from './sessions';
import './styles.css';
import { ErrorBox, Link, navigate, usePath } from './ui';

/** The shell: the key gate, the top bar and the client routes. */

function Login(props: { onKey(key: string): void; reason?: string }) {
  const [key, setValue] = useState('');
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    setKey(key.trim());
    try {
      // Any viewer route proves the key works.
      await get('/v1/sessions?limit=1');
      props.onKey(key.trim());
    } catch (err) {
      setKey(undefined);
      setError(
        err instanceof ApiError && err.status === 401
          ? new ApiError(401, 'unauthorized', 'This key is unknown, revoked or expired.')
          : err,
      );
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="login">
      <form onSubmit={submit} aria-labelledby="login-h">
        <h1 id="login-h">OAR console</h1>
        <p>
          Paste an API key. <code>oar serve</code> prints an admin key the first time it starts;{' '}
          <code>oar keys create</code> makes more (a <em>viewer</em> key can look, an <em>operator</em> key can also
          act).
        </p>
        {props.reason ? <p class="muted">{props.reason}</p> : null}
        <label>
          API key
          <input
            type="password"
            autocomplete="off"
            placeholder="oar_…"
            value={key}
            onInput={(e) => setValue((e.target as HTMLInputElement).value)}
            autofocus
          />
        </label>
        <button type="submit" class="primary" disabled={busy || !key.trim()}>
          Open the console
        </button>
        <p class="muted small">The key stays in this tab only (sessionStorage) and is sent to this server alone.</p>
        {error ? <ErrorBox error={error} /> : null}
      </form>
    </main>
  );
}

function App() {
  const [key, setState] = useState(getKey());
  const [reason, setReason] = useState<string | undefined>(undefined);
  const [path, params] = usePath();
  useEffect(() => {
    whenUnauthorized(() => {
      setKey(undefined);
      setReason('The key stopped working (revoked or expired): paste another one.');
      setState(undefined);
    });
  }, []);
  if (!key) return <Login onKey={(k) => setState(k)} reason={reason} />;
  const m = path.match(/^\/sessions\/([^/]+)(?:\/(events|time|tasks|files|jobs))?\/?$/);
  const job = path.match(/^\/jobs\/([^/]+)\/?$/);
  const schedule = path.match(/^\/schedules\/([^/]+)\/?$/);
  let screen = null;
  if (m?.[1]) {
    screen = <SessionScreen key={m[1]} sessionId={decodeURIComponent(m[1])} tab={m[2] ?? 'timeline'} params={params} />;
  } else if (job?.[1]) {
    screen = <JobScreen key={job[1]} jobId={decodeURIComponent(job[1])} />;
  } else if (path === '/jobs' || path === '/jobs/') screen = <JobsScreen />;
  else if (schedule?.[1]) {
    screen = <ScheduleScreen key={schedule[1]} scheduleId={decodeURIComponent(schedule[1])} />;
  } else if (path === '/schedules' || path === '/schedules/') screen = <SchedulesScreen />;
  else if (path === '/inbox') screen = <InboxScreen />;
  else if (path === '/' || path === '') screen = <SessionsScreen />;
  else {
    screen = (
      <section class="screen">
        <h1>Not found</h1>
        <p>
          No screen at <code>{path}</code>. <Link href="/">Back to the sessions</Link>.
        </p>
      </section>
    );
  }
  return (
    <>
      <header class="topbar">
        <Link href="/" class="brand">
          OAR <span>console</span>
        </Link>
        <nav aria-label="main">
          <Link href="/" class={path === '/' || path.startsWith('/sessions') ? 'on' : ''}>
            Sessions
          </Link>
          <Link href="/jobs" class={path.startsWith('/jobs') ? 'on' : ''}>
            Jobs
          </Link>
          <Link href="/schedules" class={path.startsWith('/schedules') ? 'on' : ''}>
            Schedules
          </Link>
          <Link href="/inbox" class={path === '/inbox' ? 'on' : ''}>
            Approvals
          </Link>
        </nav>
        <span class="spacer" />
        <button
          type="button"
          class="link"
          onClick={() => {
            setKey(undefined);
            setReason(undefined);
            setState(undefined);
            navigate('/');
          }}
        >
          Forget key
        </button>
      </header>
      <main>{screen}</main>
    </>
  );
}

render(<App />, document.getElementById('app') as HTMLElement);
