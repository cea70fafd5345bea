import { describe, expect, it } from 'vitest';
import { oarIn, tempDir, writeJson } from './cli-helpers.js';

/**
 * `oar subagent …` end to end through the real binary (docs/engine.md "Sub-agents driven by a client"): a session made
 * by `oar run` with a config naming a `researcher` agent; spawn, input, list, close, wait and resume.
 */

const answer = (message: string) => ({ protocol: { kind: 'answer', message } });

describe('oar subagent', () => {
  it('spawns a sub-agent, gives it input, closes it, waits for it and reopens it', () => {
    const cwd = tempDir('oar-subagent-');
    writeJson(cwd, 'script.json', {
      steps: [answer('Hello.')],
      agents: { researcher: { steps: [answer('Found three.'), answer('The second.'), answer('Back.')] } },
    });
    writeJson(cwd, 'oar.config.json', {
      model: 'script:script.json',
      agents: [{ name: 'researcher', description: 'Looks things up', capabilities: ['research'] }],
    });
    expect(oarIn(cwd, ['run', 'hello']).code).toBe(0);
    const sessionId = (JSON.parse(oarIn(cwd, ['sessions', '--json']).stdout) as { sessionId: string }[])[0]
      ?.sessionId as string;
    const json = (...args: string[]) => {
      const result = oarIn(cwd, ['subagent', ...args, '--json']);
      expect(result.code, `oar subagent ${args.join(' ')}: ${result.stderr}`).toBe(0);
      return JSON.parse(result.stdout) as Record<string, unknown> & { subagent?: Record<string, unknown> };
    };

    const spawned = json('spawn', sessionId, 'researcher', 'Find sources', '--id', 'sub_1');
    expect(spawned.subagent).toMatchObject({ subagentId: 'sub_1', status: 'completed', agent: 'researcher' });
    expect(json('input', sessionId, 'sub_1', 'Which is best?').subagent).toMatchObject({ status: 'completed' });
    const listed = oarIn(cwd, ['subagent', 'list', sessionId]);
    expect(listed.stdout).toContain('sub_1  completed  researcher');

    expect(json('close', sessionId, 'sub_1')).toEqual({ subagentId: 'sub_1', status: 'closed' });
    const waited = json('wait', sessionId, 'sub_1', '--timeout', '5');
    expect(waited).toMatchObject({ timedOut: false, subagents: [{ subagentId: 'sub_1', status: 'closed' }] });
    expect(json('resume', sessionId, 'sub_1', '--input', 'One more.').subagent).toMatchObject({ status: 'completed' });

    // A closed thread takes no input: a clear error, exit 2.
    json('close', sessionId, 'sub_1');
    const refused = oarIn(cwd, ['subagent', 'input', sessionId, 'sub_1', 'x']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('thread_closed');
    const unknown = oarIn(cwd, ['subagent', 'close', sessionId, 'sub_nope']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('subagent_not_found');
  });
});
