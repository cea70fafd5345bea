import { enc, type Snapshot } from './api';
import type { TaskRM } from './types';
import { Empty, Link, Status, shortId } from './ui';

/**
 * The session's task graph: every task, the runtime's own and those made with createTask, as a tree along its
 * parent edges (a task whose parent is not a task of the session is a root), each with its status, who does it,
 * its attempts and progress, what it waits for and what waits for it. A task with a thread opens that thread's
 * timeline.
 */

const EDGE_LABEL: Record<string, string> = {
  dependency: 'waits for',
  dependent: 'needed by',
  source: 'from',
  derived: 'led to',
  artifact: 'artifact',
  evidence: 'evidence',
  subagent: 'sub-agent',
};

export function TasksView(props: { sessionId: string; snapshot: Snapshot }) {
  const tasks = props.snapshot.tasks ?? [];
  if (tasks.length === 0) {
    return (
      <Empty title="No tasks yet">
        Tasks appear as the model declares work, delegates it, or a client creates one (<code>oar task create</code>).
      </Empty>
    );
  }
  const byId = new Map(tasks.map((t) => [t.taskId, t]));
  const children = new Map<string, TaskRM[]>();
  const roots: TaskRM[] = [];
  for (const task of tasks) {
    const parent = task.parentTaskId && byId.has(task.parentTaskId) ? task.parentTaskId : undefined;
    if (!parent) roots.push(task);
    else children.set(parent, [...(children.get(parent) ?? []), task]);
  }
  return (
    <section class="tasks-view" aria-label="task graph">
      <ul class="task-tree">
        {roots.map((task) => (
          <TaskNode
            key={task.taskId}
            task={task}
            sessionId={props.sessionId}
            byId={byId}
            children={children}
            seen={new Set()}
          />
        ))}
      </ul>
    </section>
  );
}

function TaskNode(props: {
  task: TaskRM;
  sessionId: string;
  byId: Map<string, TaskRM>;
  children: Map<string, TaskRM[]>;
  seen: Set<string>;
}) {
  const { task, byId } = props;
  // A parent cycle cannot be recorded, but a reader never loops on one either.
  if (props.seen.has(task.taskId)) return null;
  const seen = new Set(props.seen).add(task.taskId);
  const kids = props.children.get(task.taskId) ?? [];
  const edges = (task.relationships ?? []).filter((r) => r.kind !== 'parent' && r.kind !== 'child');
  const who = task.assignee?.kind === 'external' ? `external: ${task.assignee.name ?? '?'}` : task.assignee?.agent;
  const label = (id: string) => byId.get(id)?.title ?? shortId(id);
  return (
    <li data-task={task.taskId}>
      <div class="task-row">
        <Status status={task.status} small />
        <span class="task-title">{task.title ?? task.objective ?? task.taskId}</span>
        <span class="muted small mono">{task.taskId}</span>
        <span class="muted small">{task.taskKind}</span>
        {who ? <span class="muted small">{who}</span> : null}
        {task.attempts?.length ? (
          <span class="muted small">
            attempt {task.attempts.length}: {task.attempts[task.attempts.length - 1]?.status}
          </span>
        ) : null}
        {task.threadId ? (
          <Link href={`/sessions/${enc(props.sessionId)}?thread=${enc(task.threadId)}`} class="small">
            thread
          </Link>
        ) : null}
      </div>
      {task.statusReason ? <div class="muted small task-note">{task.statusReason}</div> : null}
      {task.progress ? (
        <div class="small task-note" data-progress>
          {task.progress.percent !== undefined ? `${task.progress.percent}% ` : ''}
          {task.progress.total !== undefined ? `${task.progress.completed ?? 0}/${task.progress.total} ` : ''}
          {task.progress.message ?? ''}
        </div>
      ) : null}
      {edges.length ? (
        <ul class="task-edges">
          {edges.map((e) => (
            <li key={`${e.kind}:${e.targetId}`} data-edge={e.kind}>
              {EDGE_LABEL[e.kind] ?? e.kind}{' '}
              <span class="mono">{byId.has(e.targetId) ? label(e.targetId) : e.targetId}</span>
              {e.status ? <span class="muted"> ({e.status})</span> : null}
            </li>
          ))}
        </ul>
      ) : null}
      {kids.length ? (
        <ul>
          {kids.map((kid) => (
            <TaskNode key={kid.taskId} {...props} task={kid} seen={seen} />
          ))}
        </ul>
      ) : null}
    </li>
  );
}
