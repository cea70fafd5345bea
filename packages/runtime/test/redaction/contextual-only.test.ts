import { describe, expect, it } from 'vitest';
import { Redactor } from '../../src/redaction/redactor.js';

/**
 * `Redactor.contextualOnly()`: what the model may be shown of a read a rule explicitly allows (docs/security.md,
 * "What the model sees") — secrets recognised anywhere stay, secrets recognised only by their context are replaced.
 */

const dotenvValue = 'Zq9dotenvVALUEab12cd34ef56';
const openai = 'sk-proj-Ab3dE5fG7hJ9kL1mN3pQ5rS7tV9wX1yZ3aB5';
const urlPassword = 'Zq9urlPASSWORD77xy';
const assigned = 'Zq9assignedPW88zz';

describe('Redactor.contextualOnly', () => {
  const redactor = Redactor.create({ secrets: [{ value: dotenvValue, kind: 'dotenv' }] });
  const text = [
    `TOKEN=${dotenvValue}`,
    `openai: ${openai}`,
    `url: postgres://app:${urlPassword}@db.internal:5432/app`,
    `PGPASSWORD=${assigned} psql`,
  ].join('\n');

  it('keeps known values and self-evident shapes, replaces context-only secrets', () => {
    const shown = redactor.contextualOnly().redactText(text);
    expect(shown).toContain(dotenvValue);
    expect(shown).toContain(openai);
    expect(shown).not.toContain(urlPassword);
    expect(shown).not.toContain(assigned);
    expect(shown).toContain('[REDACTED:url_password]');
    expect(shown).toContain('[REDACTED:password]');
  });

  it('everything it keeps is recognised again on its own, so a repeat is recorded redacted', () => {
    for (const kept of [dotenvValue, openai]) expect(redactor.redactText(`the model says ${kept}`)).not.toContain(kept);
    // While the context-only ones would not be: that is why they are never shown.
    expect(redactor.redactText(`the model says ${urlPassword}`)).toContain(urlPassword);
  });

  it('the full redactor is unchanged, and a text with nothing context-only is returned as is', () => {
    const full = redactor.redactText(text);
    for (const value of [dotenvValue, openai, urlPassword, assigned]) expect(full).not.toContain(value);
    const plain = `TOKEN=${dotenvValue} and ${openai}`;
    expect(redactor.contextualOnly().redactText(plain)).toBe(plain);
    expect(redactor.contextualOnly()).toBe(redactor.contextualOnly());
  });
});
