import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from './harness.js';
import { allEvents, answer, ofType, payload } from './helpers.js';

/**
 * Commands record with the session's own redactor, as workers do: a value from the workspace's `.env` pasted into a
 * prompt or a state value is recorded redacted (the process's redactor alone knows only credential shapes and the
 * provider keys, so it let such a value through).
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const SECRET = 'plainsecretvalue-7f3a9c2e41b8';

describe('command redaction', () => {
  it('a .env value in a prompt and in session state is recorded redacted', async () => {
    h = await harness(
      { steps: [answer('Noted.')] },
      { files: { '.env': `SERVICE_TOKEN=${SECRET}\n`, 'README.md': '# Sample\n' } },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: `Use the token ${SECRET} for the deploy.` });
    await h.runtime.settled(sessionId);
    await h.runtime.setState({ sessionId, key: 'deploy', value: { token: SECRET } });
    const events = await allEvents(h, sessionId);
    expect(JSON.stringify(events)).not.toContain(SECRET);
    const submitted = payload(ofType(events, 'turn.submitted')[0]);
    expect(submitted.input).toBe('Use the token [REDACTED:dotenv] for the deploy.');
    const redacted = ofType(events, 'output.redacted').map(payload);
    expect(redacted.some((p) => (p.kinds as Record<string, number> | undefined)?.dotenv === 1)).toBe(true);
    expect(await h.runtime.getState({ sessionId })).toEqual({ deploy: { token: '[REDACTED:dotenv]' } });
  });
});

describe('createSession redaction', () => {
  it("records a new session with its own binding's redactor: a .env value in the title is redacted everywhere", async () => {
    h = await harness(
      { steps: [answer('Noted.')] },
      { files: { '.env': `SERVICE_TOKEN=${SECRET}\n`, 'README.md': '# Sample\n' } },
    );
    const { sessionId } = await h.runtime.createSession({ title: `deploy with ${SECRET}` });
    const events = await allEvents(h, sessionId);
    expect(JSON.stringify(events)).not.toContain(SECRET);
    expect(payload(ofType(events, 'session.created')[0]).title).toBe('deploy with [REDACTED:dotenv]');
    const redacted = ofType(events, 'output.redacted').map(payload);
    expect(redacted.some((p) => ((p.kinds as Record<string, number> | undefined)?.dotenv ?? 0) > 0)).toBe(true);
    // The sessions table's title column (listed by `oar sessions`) holds the redacted title too.
    const rows = await h.store.db.selectFrom('oar_sessions').select('title').execute();
    expect(JSON.stringify(rows)).not.toContain(SECRET);
    expect(JSON.stringify(await h.runtime.listSessions())).not.toContain(SECRET);
  });
});
