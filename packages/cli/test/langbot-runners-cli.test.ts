import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ndjson, oarIn, repoRoot, tempDir, writeJson } from './cli-helpers.js';

/**
 * A LangBot runner plugin through the real `oar` binary (docs/runners.md "Running LangBot runner plugins"): listed by
 * `oar runners list` with notes for what OAR reads differently, and run by `oar run --runner`.
 */

const FIXTURE = join(repoRoot, 'packages/runtime/test/runners/fixtures/langbot');
const RUNNER_ID = 'plugin:oar-test/lb-fixture/default';

describe('oar runners list with a LangBot plugin', () => {
  it('lists the plugin runner and its notes, and runs it', () => {
    const dir = tempDir('oar-langbot-cli-');
    writeJson(dir, 'script.json', { steps: [{ text: 'unused: the runner answers' }] });
    writeJson(dir, 'oar.config.json', { model: 'script:script.json', runners: { packages: [FIXTURE] } });
    const human = oarIn(dir, ['runners', 'list']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain(`${RUNNER_ID}  Fixture runner`);
    expect(human.stdout).toContain('capabilities streaming');
    expect(human.stdout).toMatch(
      /note: .* \/capabilities\/interactions: capability "interactions" is not one OAR grants/,
    );
    expect(human.stdout).not.toContain('skipped:');
    const run = oarIn(dir, ['run', '--runner', RUNNER_ID, 'qa:stream_ok', '--json']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const end = ndjson(run.stdout).find((e) => e.type === 'turn.completed');
    expect((end?.payload as { answer?: string } | undefined)?.answer).toBe('QA_RUNNER_STREAM_OK');
  });
});
