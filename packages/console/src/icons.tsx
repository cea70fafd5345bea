/**
 * Executor icons drawn as SVG (no emoji font needed): tool (a wrench-like tool), agent (a robot head), human (a
 * person), runtime / pipeline / service (a gear). Each has a <title> with the executor type.
 */

export function ExecutorGlyph(props: { type: string }) {
  const t = props.type;
  return (
    <g class="exec-icon" fill="none" stroke="currentColor" stroke-width="1.6" stroke-linecap="round">
      <title>{t}</title>
      {t === 'tool' ? (
        <>
          <path d="M3 15 L10 8" />
          <path d="M10 8 a4 4 0 1 0 3 -6 l-2 2 l1 2 l2 1 l2 -2 a4 4 0 0 1 -6 3" />
        </>
      ) : t === 'agent' ? (
        <>
          <rect x="2.5" y="5" width="13" height="10" rx="2.5" />
          <path d="M9 5 V2" />
          <circle cx="6.5" cy="10" r="1" fill="currentColor" />
          <circle cx="11.5" cy="10" r="1" fill="currentColor" />
        </>
      ) : t === 'human' ? (
        <>
          <circle cx="9" cy="5.5" r="3" />
          <path d="M3 16 a6 6 0 0 1 12 0" />
        </>
      ) : (
        <>
          <circle cx="9" cy="9" r="3" />
          <circle cx="9" cy="9" r="6.5" stroke-dasharray="2.5 2.6" stroke-width="2.6" />
        </>
      )}
    </g>
  );
}

export function ExecutorIcon(props: { type: string }) {
  return (
    <svg class="icon" width="18" height="18" viewBox="0 0 18 18" role="img" aria-label={props.type}>
      <ExecutorGlyph type={props.type} />
    </svg>
  );
}
