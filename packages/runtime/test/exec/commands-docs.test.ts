import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { OarConfigSchema } from '../../src/index.js';
import { evaluatePermission } from '../../src/policy/permissions.js';
import { processTool } from '../../src/tools/exec/process-tool.js';

/** The examples of docs/commands.md are what the runtime accepts, and mean what the page says they mean. */
const doc = readFileSync(fileURLToPath(new URL('../../../../docs/commands.md', import.meta.url)), 'utf8');
const blocks = [...doc.matchAll(/```json\n([\s\S]*?)\n```/g)].map((match) => JSON.parse(match[1] as string));
const configs = blocks.filter((block) => 'tools' in block).map((block) => OarConfigSchema.parse(block));

describe('docs/commands.md examples', () => {
  it('every configuration example is a valid config file', () => {
    expect(configs).toHaveLength(2);
    expect(configs[1]?.tools.exec).toMatchObject({
      secrets: ['NPM_TOKEN'],
      sandbox: { profile: 'bwrap', network: false, unsandboxed: 'ask', hide: ['/srv/private'] },
      maxBackground: 4,
    });
  });

  it("the first example's rules decide as the page says", () => {
    const permissions = configs[0]?.permissions ?? { mode: 'default' as const, rules: [] };
    const decide = (argv: string[]) =>
      evaluatePermission(
        {
          executor: { type: 'tool', target: 'exec' },
          tool: {
            name: 'exec',
            isReadOnly: false,
            isDestructive: true,
            isConcurrencySafe: false,
            capabilities: ['shell'],
          },
          paths: [],
          command: { argv },
        },
        permissions,
      ).decision;
    expect(decide(['npm', 'test'])).toBe('allow');
    expect(decide(['git', 'status', '--short'])).toBe('allow');
    expect(decide(['git', 'push', 'origin', 'main'])).toBe('ask');
    expect(decide(['rm', '-fr', 'build'])).toBe('deny');
    // Not named by a rule: the mode's default for a command that is not read-only.
    expect(decide(['make'])).toBe('ask');
  });

  it('the process tool example is a valid input', () => {
    const example = blocks.find((block) => 'processId' in block);
    const parsed = processTool().input.safeParse(example);
    expect(parsed.success).toBe(true);
  });
});
