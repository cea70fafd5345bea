import { readFile, stat } from 'node:fs/promises';
import Database from 'better-sqlite3';
import { newWalkStats, walkFiles, walkPolicyFor } from '../tools/builtin/walk.js';
import { realWorkspaceRoot, resolveWorkspacePath } from '../tools/workspace.js';
import type { AuditTarget } from './run-session.js';
import { apiError, type RunSession } from './run-session.js';

/**
 * knowledge.retrieve over a minimal real knowledge base: a folder of the workspace (declared in the runner binding's
 * `knowledge`), its text files cut into paragraphs and indexed with SQLite FTS5, ranked by bm25. The index lives in
 * memory, built on first use and rebuilt when a file of the folder changed (by path, size and mtime).
 */

/** Files larger than this are not indexed; at most MAX_FILES files per knowledge base. */
const MAX_FILE_BYTES = 1024 * 1024;
const MAX_FILES = 2_000;
/** A paragraph longer than this is cut into pieces of this size. */
const MAX_CHUNK_CHARS = 2_000;

interface Index {
  signature: string;
  db: Database.Database;
}

/** Indexes by absolute folder, shared by every run of the process (a folder's index does not depend on the run). */
const indexes = new Map<string, Index>();

async function filesOf(root: string, folder: string, signal: AbortSignal) {
  const files: { relative: string; absolute: string; size: number; mtimeMs: number }[] = [];
  for await (const file of walkFiles({
    root,
    base: folder,
    policy: walkPolicyFor(undefined),
    signal,
    stats: newWalkStats(),
  })) {
    if (files.length >= MAX_FILES) break;
    const info = await stat(file.absolute);
    if (info.size > MAX_FILE_BYTES) continue;
    files.push({ relative: file.relative, absolute: file.absolute, size: info.size, mtimeMs: info.mtimeMs });
  }
  return files;
}

function chunksOf(text: string): string[] {
  const chunks: string[] = [];
  for (const paragraph of text.split(/\n\s*\n/)) {
    const trimmed = paragraph.trim();
    for (let at = 0; at < trimmed.length; at += MAX_CHUNK_CHARS) chunks.push(trimmed.slice(at, at + MAX_CHUNK_CHARS));
  }
  return chunks;
}

async function indexOf(root: string, folder: string, signal: AbortSignal): Promise<Database.Database> {
  const files = await filesOf(root, folder, signal);
  const signature = files.map((f) => `${f.relative}:${f.size}:${f.mtimeMs}`).join('\n');
  const cached = indexes.get(folder);
  if (cached?.signature === signature) return cached.db;
  cached?.db.close();
  const db = new Database(':memory:');
  db.exec('CREATE VIRTUAL TABLE chunks USING fts5(content, source UNINDEXED)');
  const insert = db.prepare('INSERT INTO chunks (content, source) VALUES (?, ?)');
  for (const file of files) {
    const text = await readFile(file.absolute, 'utf8');
    if (text.includes('\0')) continue; // binary
    db.transaction(() => {
      for (const chunk of chunksOf(text)) insert.run(chunk, file.relative);
    })();
  }
  indexes.set(folder, { signature, db });
  return db;
}

/** The query as FTS5 terms: each word quoted (no operator of the caller's reaches FTS5), any of them matching. */
function ftsQuery(text: string): string | undefined {
  const words = text.match(/[\p{L}\p{N}_]+/gu)?.slice(0, 32) ?? [];
  return words.length ? words.map((w) => `"${w}"`).join(' OR ') : undefined;
}

export async function knowledgeRetrieve(session: RunSession, payload: Record<string, unknown>, audit: AuditTarget) {
  const kbId = typeof payload.kb_id === 'string' ? payload.kb_id.slice(0, 128) : undefined;
  const query = typeof payload.query_text === 'string' ? payload.query_text : undefined;
  const topK = payload.top_k === undefined ? 5 : payload.top_k;
  if (!kbId || query === undefined || !Number.isInteger(topK) || (topK as number) < 1 || (topK as number) > 50) {
    throw apiError('invalid_argument', 'knowledge.retrieve takes {kb_id, query_text, top_k (1-50)?}');
  }
  audit.resource = kbId;
  audit.scope = 'knowledge_base';
  if (!session.access.knowledgeOps.includes('retrieve'))
    throw apiError('unauthorized', 'knowledge.retrieve is not granted');
  if (!session.access.knowledgeBases.includes(kbId)) {
    throw apiError('unauthorized', `knowledge base ${kbId} is not among this run's resources`);
  }
  const kb = session.agent.runner?.knowledge?.find((k) => k.id === kbId);
  if (!kb) throw apiError('not_found', `no knowledge base ${kbId}`);
  const root = await realWorkspaceRoot(session.engine.workspaceRoot);
  let folder: string;
  try {
    // Confined like every workspace path: a folder (or a link) leading outside the workspace is refused.
    folder = await resolveWorkspacePath(root, kb.folder, { mustExist: true }, root);
  } catch (error) {
    throw apiError('not_found', `knowledge base ${kbId} is not readable: ${(error as Error).message}`);
  }
  const terms = ftsQuery(query);
  if (!terms) return { results: [] };
  const db = await indexOf(root, folder, session.signal);
  const rows = db
    .prepare('SELECT content, source, bm25(chunks) AS rank FROM chunks WHERE chunks MATCH ? ORDER BY rank LIMIT ?')
    .all(terms, topK) as { content: string; source: string; rank: number }[];
  return {
    results: rows.map((row) => ({
      content: session.engine.redactor.redactText(row.content),
      metadata: { source: row.source },
      // bm25 is lower for better matches; the score is higher for them.
      score: -row.rank,
    })),
  };
}
