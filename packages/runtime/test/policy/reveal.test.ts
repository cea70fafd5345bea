import { describe, expect, it } from 'vitest';
import type { PermissionRequest } from '../../src/config/permission-request.js';
import type { PermissionRule } from '../../src/config/permissions.js';
import { revealsOutput } from '../../src/policy/reveal.js';

/** What counts as a rule that EXPLICITLY allows a read (docs/security.md, "What the model sees"). */

const READ = { name: 'read', isReadOnly: true, isDestructive: false, isConcurrencySafe: true, capabilities: ['read'] };
const WRITE = { ...READ, name: 'write', isReadOnly: false, capabilities: ['write'] };

function request(paths: string[], tool = READ): PermissionRequest {
  return { executor: { type: 'tool', target: tool.name }, tool, paths };
}

const allow = (paths: string[], extra: Partial<PermissionRule> = {}): PermissionRule => ({
  decision: 'allow',
  paths,
  ...extra,
});

describe('revealsOutput: an allow rule that names the path', () => {
  it('a glob naming the file, or the kind of credential file, is explicit', () => {
    expect(revealsOutput([allow(['.env.test'])], request(['.env.test']))).toBe(true);
    expect(revealsOutput([allow(['**/.env*'])], request(['config/.env.test']))).toBe(true);
    expect(revealsOutput([allow(['certs/*.pem'])], request(['certs/server.pem']))).toBe(true);
    expect(revealsOutput([allow(['notes/creds.txt'], { tool: 'read' })], request(['notes/creds.txt']))).toBe(true);
  });

  it('a glob that sweeps the file up with its neighbours is not', () => {
    expect(revealsOutput([allow(['**'])], request(['.env.test']))).toBe(false);
    expect(revealsOutput([allow(['*'])], request(['.env.test']))).toBe(false);
    expect(revealsOutput([allow(['notes/**'])], request(['notes/creds.txt']))).toBe(false);
  });

  it('the rule must match the call: another tool, a deny or ask rule, no paths condition', () => {
    expect(revealsOutput([allow(['.env.test'], { tool: 'grep' })], request(['.env.test']))).toBe(false);
    expect(revealsOutput([{ decision: 'ask', paths: ['.env.test'] }], request(['.env.test']))).toBe(false);
    expect(revealsOutput([{ decision: 'allow', tool: 'read' }], request(['.env.test']))).toBe(false);
    expect(revealsOutput([], request(['.env.test']))).toBe(false);
  });

  it('every touched path must be named: a link reaching an unnamed file is not revealed', () => {
    // `alias.txt` is a symlink to `.env.prod`: the request carries both (executors/tool.ts).
    const linked = request(['alias.txt', '.env.prod']);
    expect(revealsOutput([allow(['alias.txt'])], linked)).toBe(false);
    expect(revealsOutput([allow(['alias.txt', '.env.prod'])], linked)).toBe(true);
  });

  it('only a read-only tool call touching some path qualifies', () => {
    expect(revealsOutput([allow(['.env.test'])], request(['.env.test'], WRITE))).toBe(false);
    expect(revealsOutput([allow(['.env.test'])], request([]))).toBe(false);
    const destructive = { ...READ, isDestructive: true };
    expect(revealsOutput([allow(['.env.test'])], request(['.env.test'], destructive))).toBe(false);
  });
});
