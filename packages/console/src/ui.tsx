import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError } from './api';
import { highlightJson, renderMarkdown } from './markdown.js';
import { look } from './model';
import type { StreamStatus } from './stream';

// ---- routing: path-based, the server falls back to index.html for client routes ----

export function usePath(): [string, URLSearchParams] {
  const [, setTick] = useState(0);
  useEffect(() => {
    const on = () => setTick((n) => n + 1);
    window.addEventListener('popstate', on);
    window.addEventListener('oar:navigate', on);
    return () => {
      window.removeEventListener('popstate', on);
      window.removeEventListener('oar:navigate', on);
    };
  }, []);
  return [location.pathname, new URLSearchParams(location.search)];
}

export function navigate(to: string, replace = false): void {
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  window.dispatchEvent(new Event('oar:navigate'));
}

export function Link(props: { href: string; children: ComponentChildren; class?: string; title?: string }) {
  return (
    <a
      href={props.href}
      class={props.class}
      title={props.title}
      onClick={(e) => {
        if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
        e.preventDefault();
        navigate(props.href);
      }}
    >
      {props.children}
    </a>
  );
}

// ---- states ----

/** A status pill; `looks`: another vocabulary's symbols and tones (schedules'), before the runtime's. */
export function Status(props: {
  status: string;
  small?: boolean;
  looks?: Record<string, { symbol: string; tone: string }>;
}) {
  const l = props.looks?.[props.status] ?? look(props.status);
  return (
    <span class={`status tone-${l.tone}${props.small ? ' small' : ''}`} data-status={props.status}>
      <span aria-hidden="true">{l.symbol}</span> {props.status.replace(/_/g, ' ')}
    </span>
  );
}

export function Loading(props: { what: string }) {
  return (
    <div class="state loading" role="status" aria-live="polite">
      <span class="spinner" aria-hidden="true" /> Loading {props.what}…
    </div>
  );
}

export function Empty(props: { title: string; children?: ComponentChildren }) {
  return (
    <div class="state empty">
      <strong>{props.title}</strong>
      {props.children ? <div>{props.children}</div> : null}
    </div>
  );
}

/** A row of toggle buttons choosing one filter (the lists' status filters). */
export function Filters(props: {
  label: string;
  options: readonly { id: string; label: string }[];
  value: string;
  onChange: (id: string) => void;
}) {
  return (
    <fieldset class="filters" aria-label={props.label}>
      {props.options.map((x) => (
        <button
          type="button"
          key={x.id}
          aria-pressed={props.value === x.id}
          class={props.value === x.id ? 'on' : ''}
          onClick={() => props.onChange(x.id)}
        >
          {x.label}
        </button>
      ))}
    </fieldset>
  );
}

export function ErrorBox(props: { error: unknown; retry?: () => void }) {
  const e = props.error;
  const code = e instanceof ApiError ? e.code : 'error';
  const message = e instanceof Error ? e.message : String(e);
  return (
    <div class="state error" role="alert">
      <strong>Something went wrong</strong> <code>{code}</code>
      <div>{message}</div>
      {e instanceof ApiError && e.retryable ? <div class="muted">This is temporary: try again.</div> : null}
      {props.retry ? (
        <button type="button" onClick={props.retry}>
          Try again
        </button>
      ) : null}
    </div>
  );
}

export function Connection(props: { status: StreamStatus | undefined; label?: string }) {
  const s = props.status;
  if (!s) return null;
  const text =
    s.state === 'live'
      ? 'live'
      : s.state === 'connecting'
        ? 'connecting…'
        : `disconnected — reconnecting${s.attempts > 1 ? ` (attempt ${s.attempts})` : ''}…`;
  return (
    <span
      class={`conn conn-${s.state}`}
      data-conn={s.state}
      role="status"
      aria-live="polite"
      title={s.error ?? (s.cursor !== undefined ? `resumes after event ${s.cursor}` : '')}
    >
      <span aria-hidden="true">{s.state === 'live' ? '●' : s.state === 'connecting' ? '◌' : '⚠'}</span>{' '}
      {props.label ? `${props.label}: ` : ''}
      {text}
      {s.state === 'reconnecting' && s.cursor !== undefined ? ` from event ${s.cursor}` : ''}
    </span>
  );
}

// ---- text ----

export function Markdown(props: { source: string }) {
  const html = renderMarkdown(props.source);
  return <div class="markdown" dangerouslySetInnerHTML={{ __html: html }} />;
}

export function Json(props: { value: unknown; max?: number }) {
  let text = JSON.stringify(props.value, null, 2) ?? 'undefined';
  if (props.max && text.length > props.max) text = `${text.slice(0, props.max)}\n… (${text.length} characters)`;
  return <pre class="code json" dangerouslySetInnerHTML={{ __html: highlightJson(text) }} />;
}

export function ago(iso: string | undefined): string {
  if (!iso) return '—';
  const ms = Date.now() - Date.parse(iso);
  if (Number.isNaN(ms)) return iso;
  if (ms < 5_000) return 'just now';
  if (ms < 60_000) return `${Math.round(ms / 1000)} s ago`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min ago`;
  if (ms < 86_400_000) return `${Math.round(ms / 3_600_000)} h ago`;
  return new Date(iso).toLocaleString();
}

export function shortId(id: string): string {
  return id.length > 14 ? `${id.slice(0, 4)}…${id.slice(-6)}` : id;
}
