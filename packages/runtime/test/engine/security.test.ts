import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { putArtifact, Store } from '../../src/index.js';
import { removeAfterFile } from '../support/temp-dirs.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, errorCode, ofType, payload } from './helpers.js';

/** Path rules hold however a file is reached; artifacts never cross sessions; every executor passes the gate. */

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const denySecrets = { mode: 'bypass' as const, rules: [{ decision: 'deny' as const, paths: ['secrets/**'] }] };

function withSecrets(workspace: string): void {
  mkdirSync(join(workspace, 'secrets'));
  writeFileSync(join(workspace, 'secrets/key.txt'), 'TOPSECRET=hunter2\n');
  mkdirSync(join(workspace, 'docs'));
  writeFileSync(join(workspace, 'docs/readme.txt'), 'TOPSECRET is a placeholder word here\n');
}

async function observations(sessionId: string): Promise<string> {
  return JSON.stringify(ofType(await allEvents(h!, sessionId), 'tool.result').map((e) => payload(e).observation));
}

describe('path rules cannot be bypassed', () => {
  it('grep and glob never read or list files a deny rule names', async () => {
    h = await harness(
      {
        steps: [
          act([
            { id: 'g', type: 'tool', name: 'grep', args: { pattern: 'TOPSECRET' }, result: 'full' },
            { id: 'l', type: 'tool', name: 'glob', args: { pattern: '**/*.txt' }, result: 'full' },
          ]),
          answer('done'),
        ],
      },
      { permissions: denySecrets },
    );
    withSecrets(h.workspace);
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'search' });
    await h.runtime.settled(sessionId);
    const seen = await observations(sessionId);
    expect(seen).toContain('docs/readme.txt');
    expect(seen).not.toContain('hunter2');
    expect(seen).not.toContain('secrets/key.txt');
  });

  it('a symlink alias of a denied directory is denied too', async () => {
    h = await harness(
      {
        steps: [act([{ id: 'r', type: 'tool', name: 'read', args: { filePath: 'docs/alias/key.txt' } }]), answer('x')],
      },
      { permissions: denySecrets },
    );
    withSecrets(h.workspace);
    symlinkSync('../secrets', join(h.workspace, 'docs/alias'));
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'read through the alias' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(payload(ofType(events, 'permission.evaluated')[0]).decision).toBe('deny');
    expect(ofType(events, 'tool.started')).toEqual([]);
    expect(JSON.stringify(events)).not.toContain('hunter2');
  });
});

describe('artifacts never cross sessions', () => {
  it('expand_ref of another session’s artifact (same store) fails as an unknown reference', async () => {
    const dir = removeAfterFile(mkdtempSync(join(tmpdir(), 'oar-xsession-')));
    const store = await Store.open(join(dir, 'oar.db'));
    const foreign = await putArtifact(store.db, 'ses_other', { text: 'TOPSECRET=hunter2' });
    const expand = {
      text: `\`\`\`json agent-protocol\n${JSON.stringify({
        type: 'agent.protocol',
        version: '1',
        intent: 'expand_ref',
        payload: { type: 'expand_ref', refs: [{ ref: foreign.uri }] },
      })}\n\`\`\``,
    };
    h = await harness({ steps: [expand, answer('x')] }, { store });
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'expand it' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const failed = ofType(events, 'run.status').find((e) => payload(e).status === 'failed');
    expect(JSON.stringify(payload(failed).observation)).toContain('unknown_reference');
    expect(JSON.stringify(events)).not.toContain('hunter2');
  });
});

describe('every executor passes the permission gate', () => {
  it('a deny rule on runtime actions stops expand_ref, recorded as permission.evaluated', async () => {
    const expand = {
      text: `\`\`\`json agent-protocol\n${JSON.stringify({
        type: 'agent.protocol',
        version: '1',
        intent: 'expand_ref',
        payload: { type: 'expand_ref', refs: [{ ref: 'artifact://art_x' }] },
      })}\n\`\`\``,
    };
    h = await harness(
      { steps: [expand, answer('x')] },
      { permissions: { mode: 'default', rules: [{ decision: 'deny', executor: 'runtime' }] } },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'expand' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(payload(ofType(events, 'permission.evaluated')[0])).toMatchObject({ decision: 'deny', source: 'rule' });
    const denied = ofType(events, 'run.status').find((e) => payload(e).status === 'denied');
    expect(denied).toBeDefined();
  });
});

describe('bad input to the control plane', () => {
  it('a missing workspace, a duplicate or invalid session id are structured errors', async () => {
    h = await harness({ steps: [] });
    const { sessionId } = await h.runtime.createSession({ sessionId: 'ses_fixed' });
    expect(sessionId).toBe('ses_fixed');
    expect(await errorCode(h.runtime.createSession({ sessionId: 'ses_fixed' }))).toBe('session_exists');
    expect(await errorCode(h.runtime.createSession({ sessionId: 'has space' }))).toBe('invalid_input');
    expect(await errorCode(harness({ steps: [] }, { workspaceRoot: '/nonexistent/oar-ws' }))).toBe(
      'workspace_unavailable',
    );
  });
});
