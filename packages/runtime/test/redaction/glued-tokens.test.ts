import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RedactionTally, Redactor } from '../../src/redaction/index.js';

/**
 * A credential glued after `_` (`KEY_sk-proj-…`, `x_ghp_…`): `\b` sees no word boundary between `_` and a letter,
 * so the shapes anchored on it used to miss these. The anchor is "no letter or digit before", which `_` passes,
 * and a token prefix inside a word (`task-ant-…`, `desk_live_…`) still does not start a match.
 */

const shapes = Redactor.patternsOnly();
const FUZZ_SEED = Number(process.env.OAR_FUZZ_SEED ?? 1511);

const TOKENS: [string, string][] = [
  ['openai_key', 'sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z'],
  ['anthropic_key', 'sk-ant-api03-abcDEF123_ghiJKL456-mnoPQR789stu'],
  ['github_token', 'ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789'],
  ['github_token', 'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123'],
  ['slack_token', 'xoxb-123456789012-1234567890123-AbCdEfGhIjKl'],
  ['stripe_key', 'sk_live_4eC39HqLyjWDarjtT1zdp7dc'],
  ['aws_access_key', 'AKIAIOSFODNN7EXAMPLE'],
  ['google_api_key', 'AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI'],
  ['jwt', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U'],
];

describe('tokens glued after an underscore', () => {
  const glued: [string, string, string][] = [
    ['openai_key', 'KEY_sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z', 'KEY_[REDACTED:openai_key]'],
    ['github_token', 'x_ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 ok', 'x_[REDACTED:github_token] ok'],
    ...TOKENS.map(([kind, token]): [string, string, string] => [kind, `OAR_${token};`, `OAR_[REDACTED:${kind}];`]),
  ];

  it.each(glued)('%s: %s', (kind, input, expected) => {
    const tally = new RedactionTally();
    expect(shapes.redactText(input, tally)).toBe(expected);
    expect(tally.counts).toEqual({ [kind]: 1 });
  });

  it('any identifier ending in `_` before a token: the token is redacted, the identifier kept', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[A-Za-z][A-Za-z0-9_]{0,20}_$/),
        fc.constantFrom(...TOKENS),
        (name, [kind, token]) => {
          expect(shapes.redactText(`${name}${token}`)).toBe(`${name}[REDACTED:${kind}]`);
        },
      ),
      { numRuns: 300, seed: FUZZ_SEED },
    );
  });
});

describe('no new false positives from the relaxed anchor', () => {
  const unchanged = [
    // A token prefix inside a word is not a token.
    'task-ant-api03-abcDEF123_ghiJKL456-mnoPQR789stu',
    'mask-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z',
    'desk_live_4eC39HqLyjWDarjtT1zdp7dc',
    'xghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789',
    'BAKIAIOSFODNN7EXAMPLE',
    'theyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N',
    // Words after an underscore that only look like a prefix.
    'use_sk-learn-preprocessing-pipeline-for-the-model',
    'my_skeleton_key_generator',
    'MAX_AKIA_LENGTH',
    'is_ghp_enabled = true',
    'run_xoxb-handler',
    'path/to/my_sk-ant-notes.md',
    'config_eyJ.json',
  ];

  it.each(unchanged)('%s', (text) => {
    expect(shapes.redactText(text)).toBe(text);
  });

  it('identifiers of letters, digits, `_` and `-` alone are never redacted', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z_-]{0,80}$/), (text) => {
        expect(shapes.redactText(text)).toBe(text);
      }),
      { numRuns: 500, seed: FUZZ_SEED },
    );
  });
});
