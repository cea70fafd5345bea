import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { buildRuntime } from '@oar/runtime';
import { describe, expect, it } from 'vitest';
import { DEMO_PROMPT, prepareDemo } from '../src/demo.js';
import { driveSession } from '../src/session-driver.js';
import { tempDir } from './cli-helpers.js';

/**
 * The demo's answer says what happened to its write, from the recorded outcome (the script's alternatives are
 * chosen by the observation the model is shown), not a fixed sentence that fits either way.
 */
async function demoTurn(approvals: 'approve' | 'deny') {
  const cwd = tempDir('oar-demo-answer-');
  const { config, baseDir, workspace } = await prepareDemo(cwd);
  const { runtime, store } = await buildRuntime(config, baseDir, {
    cwd,
    env: {},
    workspace,
    worker: { sessions: [] },
    resumeOnStart: false,
  });
  try {
    const { sessionId } = await runtime.createSession({ title: 'demo answer' });
    runtime.worker?.adopt(sessionId);
    const { turnId } = await runtime.submitTurn({ sessionId, input: DEMO_PROMPT });
    const result = await driveSession(runtime, sessionId, turnId, { json: true, approvals, autoNote: 'test' });
    return { result, reviewWritten: existsSync(join(workspace, 'REVIEW.md')) };
  } finally {
    await runtime.close();
    await store.close();
  }
}

describe('oar demo: the answer reports the write as it happened', { timeout: 120_000 }, () => {
  it('approved: the answer says the review is in REVIEW.md, and it is', async () => {
    const { result, reviewWritten } = await demoTurn('approve');
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect(reviewWritten).toBe(true);
    expect(result.answer).toContain('The write was approved: the review is in `REVIEW.md`.');
    expect(result.answer).not.toContain('denied');
  });

  it('denied: the answer says REVIEW.md was not written, and it was not', async () => {
    const { result, reviewWritten } = await demoTurn('deny');
    expect(result.status, JSON.stringify(result.error)).toBe('completed');
    expect(reviewWritten).toBe(false);
    expect(result.answer).toContain('The write was denied, so `REVIEW.md` was not written');
    expect(result.answer).not.toContain('approved');
  });
});
