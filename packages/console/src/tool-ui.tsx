import { useEffect, useState } from 'preact/hooks';
import { enc, get } from './api';
import {
  type ActionView,
  type BlockView,
  type FieldView,
  type ToolUiView,
  toolMessageFor,
  toolUiView,
} from './tool-ui-model';
import { ErrorBox, Loading } from './ui';

/**
 * A call's tool UI, as plain accessible elements: the view model of tool-ui-model.ts rendered with text nodes only.
 * The `ui_schema` comes from the history endpoint (`messages[].ui_schema`, compiled by the server from the call's
 * stored UI hints when it is read), as of the event that ended the call.
 */

function Value(props: { field: FieldView }) {
  const f = props.field;
  if (f.format === 'datetime') return <time dateTime={f.text}>{f.text}</time>;
  return <>{f.text}</>;
}

function Fields(props: { fields: FieldView[] }) {
  if (props.fields.length === 0) return null;
  return (
    <dl class="ui-fields">
      {props.fields.map((f, i) => (
        <div key={`${i}-${f.label}`}>
          <dt>{f.label}</dt>
          <dd>
            <Value field={f} />
          </dd>
        </div>
      ))}
    </dl>
  );
}

function Actions(props: { actions: ActionView[] }) {
  if (props.actions.length === 0) return null;
  return (
    <div class="ui-actions">
      {props.actions.map((a) =>
        a.kind === 'link' ? (
          <a key={a.id} href={a.href} target="_blank" rel="noopener noreferrer">
            {a.label} ↗
          </a>
        ) : (
          <button key={a.id} type="button" disabled title={a.title} aria-label={`${a.label} (proposal, not run)`}>
            {a.label}
          </button>
        ),
      )}
    </div>
  );
}

function Block(props: { block: BlockView }) {
  const b = props.block;
  switch (b.kind) {
    case 'card':
    case 'calendar_event':
    case 'contact':
      return (
        <section class={`ui-card ui-${b.kind}`} aria-label={b.title} data-ui={b.kind}>
          <h4>
            {b.kind === 'calendar_event' ? <span class="muted small">Event · </span> : null}
            {b.kind === 'contact' ? <span class="muted small">Contact · </span> : null}
            {b.title}
          </h4>
          {b.kind === 'card' && b.body !== undefined ? <p class="ui-body">{b.body}</p> : null}
          <Fields fields={b.fields} />
          {b.kind !== 'contact' ? <Actions actions={b.actions} /> : null}
        </section>
      );
    case 'list':
      return (
        <section class="ui-list" aria-label={b.title ?? 'list'} data-ui="list">
          {b.title !== undefined ? <h4>{b.title}</h4> : null}
          {b.items.length === 0 ? (
            <p class="muted">{b.empty}</p>
          ) : (
            <ul>
              {b.items.map((item) => (
                <li key={item.id}>
                  <strong>{item.title}</strong>
                  {item.subtitle !== undefined ? <span> — {item.subtitle}</span> : null}
                  {item.meta !== undefined ? <span class="muted small"> ({item.meta})</span> : null}
                </li>
              ))}
            </ul>
          )}
        </section>
      );
    case 'table':
      return (
        <section class="ui-table" data-ui="table">
          <table class="list">
            {b.title !== undefined ? <caption>{b.title}</caption> : null}
            <thead>
              <tr>
                {b.columns.map((c, i) => (
                  <th key={`${i}-${c}`} scope="col">
                    {c}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {b.rows.map((r) => (
                <tr key={r.id}>
                  {r.cells.map((cell, i) => (
                    <td key={`${r.id}-${i}`}>{cell}</td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      );
    case 'key_value':
      return (
        <section class="ui-kv" aria-label={b.title ?? 'details'} data-ui="key_value">
          {b.title !== undefined ? <h4>{b.title}</h4> : null}
          <Fields fields={b.fields} />
        </section>
      );
    case 'confirmation':
      return (
        <section class={`ui-confirmation ui-${b.outcome}`} aria-label={b.title} data-ui="confirmation">
          <h4>
            <span aria-hidden="true">{b.mark}</span> <span class="ui-outcome">{b.outcomeLabel}</span>: {b.title}
          </h4>
          <p>{b.message}</p>
          <Actions actions={b.actions} />
        </section>
      );
    case 'unsupported':
      return <p class="muted small">(a “{b.type}” component this console does not draw)</p>;
  }
}

export function ToolUi(props: { view: ToolUiView }) {
  return (
    <div class="tool-ui" data-tool-call={props.view.toolCallId}>
      {props.view.blocks.map((b) => (
        <Block key={b.id} block={b} />
      ))}
    </div>
  );
}

/** The tool UI of one call, fetched from history as of the event that ended it. */
export function ToolUiSection(props: { sessionId: string; toolCallId: string; at: number }) {
  const [state, setState] = useState<{ key: string; view?: ToolUiView; none?: boolean } | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const key = `${props.sessionId}|${props.toolCallId}|${props.at}`;
  useEffect(() => {
    let stopped = false;
    setError(undefined);
    (async () => {
      try {
        const r = await get<{ messages?: unknown }>(`/v1/sessions/${enc(props.sessionId)}/history?at=${props.at}`);
        if (stopped) return;
        const view = toolUiView(toolMessageFor(r.messages, props.toolCallId)?.ui_schema);
        setState(view ? { key, view } : { key, none: true });
      } catch (e) {
        if (!stopped) setError(e);
      }
    })();
    return () => {
      stopped = true;
    };
  }, [key]);
  if (error) return <ErrorBox error={error} />;
  if (!state || state.key !== key) return <Loading what="the tool UI" />;
  if (!state.view) return <p class="muted">no tool UI for this call</p>;
  return <ToolUi view={state.view} />;
}
