import dagre from '@dagrejs/dagre';
import type { ThreadRM } from './api';
import { ExecutorIcon } from './icons';
import { type ActionNode, actionStatus, look, type RunGraph } from './model';

/**
 * One action graph as a DAG: dagre lays it out left to right; nodes are actions (executor icon, title, status as a
 * symbol and a word, colour and border style by status class), edges are `dependsOn`. Nodes are HTML buttons laid
 * over the SVG edges: Tab reaches them, Enter or a click selects one.
 */

/** Wide enough for a status and a target side by side ("✓ completed · code-reviewer", "‖ waiting permission · write"). */
const W = 248;
const H = 58;

interface Laid {
  nodes: Map<string, { x: number; y: number }>;
  edges: { from: string; to: string; points: { x: number; y: number }[] }[];
  width: number;
  height: number;
}

/**
 * Layouts by graph shape (the run, its actions and their dependencies): a status change redraws without laying
 * out again, and time travel, which folds a fresh model at every position, reuses every graph it has seen.
 */
const layouts = new Map<string, Laid>();

function layout(run: RunGraph): Laid {
  const key = `${run.runId}|${run.actions.map((a) => `${a.id}<${a.dependsOn.join('+')}`).join(',')}`;
  const cached = layouts.get(key);
  if (cached) return cached;
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'LR', nodesep: 18, ranksep: 48, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const a of run.actions) g.setNode(a.id, { width: W, height: H });
  const ids = new Set(run.actions.map((a) => a.id));
  for (const a of run.actions) for (const d of a.dependsOn) if (ids.has(d)) g.setEdge(d, a.id);
  dagre.layout(g);
  const graph = g.graph();
  const laid: Laid = {
    nodes: new Map(
      run.actions.map((a) => {
        const n = g.node(a.id);
        return [a.id, { x: n.x - W / 2, y: n.y - H / 2 }];
      }),
    ),
    edges: g.edges().map((e) => ({ from: e.v, to: e.w, points: g.edge(e).points ?? [] })),
    width: Math.max(graph.width ?? W, W + 16),
    height: Math.max(graph.height ?? H, H + 16),
  };
  if (layouts.size > 5000) layouts.clear();
  layouts.set(key, laid);
  return laid;
}

export function Dag(props: {
  run: RunGraph;
  rm: ThreadRM | undefined;
  selected?: string;
  onSelect(a: ActionNode): void;
}) {
  const { run, rm } = props;
  const laid = layout(run);
  const nodes = run.actions.map((a) => ({
    a,
    ...(laid.nodes.get(a.id) ?? { x: 0, y: 0 }),
    status: actionStatus(a, rm),
  }));
  return (
    <div class="dag-wrap">
      <figure
        class="dag"
        style={{ width: `${laid.width}px`, height: `${laid.height}px` }}
        aria-label={`action graph: ${run.title ?? run.runId}`}
      >
        <svg class="dag-edges" width={laid.width} height={laid.height} aria-hidden="true">
          <defs>
            <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">
              <path d="M0,0 L10,5 L0,10 z" class="dag-arrow" />
            </marker>
          </defs>
          {laid.edges.map((e) => (
            <polyline
              key={`${e.from}-${e.to}`}
              class="dag-edge"
              points={e.points.map((p) => `${p.x},${p.y}`).join(' ')}
              marker-end="url(#arrow)"
            />
          ))}
        </svg>
        {nodes.map(({ a, x, y, status }) => {
          const l = look(status);
          const label = a.title ?? a.id;
          return (
            <button
              type="button"
              key={a.id}
              class={`dag-node tone-${l.tone}${props.selected === a.id ? ' selected' : ''}`}
              data-action={a.id}
              data-status={status}
              style={{ left: `${x}px`, top: `${y}px`, width: `${W}px`, height: `${H}px` }}
              aria-pressed={props.selected === a.id}
              // The whole label, status and target, also when a long one is cut to the node's width.
              title={`${label} — ${status.replace(/_/g, ' ')} · ${a.executorType}${a.target ? ` ${a.target}` : ''} · ${a.id}`}
              onClick={() => props.onSelect(a)}
            >
              <span class="dag-title">
                <ExecutorIcon type={a.executorType} /> <span class="dag-label">{label}</span>
              </span>
              <span class="dag-sub">
                <span aria-hidden="true">{l.symbol}</span> {status.replace(/_/g, ' ')}
                {a.target ? <span class="muted"> · {a.target}</span> : null}
              </span>
            </button>
          );
        })}
      </figure>
    </div>
  );
}
