import { RE2JS } from 're2js';
import { setRecent } from '../lru.js';
import { translateGlob } from './glob-pattern.js';

/**
 * Globs of permission rules, grants and default deny rules (tool names, operations, paths), matched in linear time.
 *
 * The patterns come from configuration, but what they are matched against — paths, tool names, operations — comes
 * from the model. picomatch compiles a glob to a backtracking RegExp, so one unlucky rule (nested extglob stars)
 * met with a long model-chosen path could freeze the process in the permission check. The glob tools' translator
 * (kernel/match/glob-pattern.ts) turns the same syntax into RE2, which never backtracks; here it runs with `dot: true`
 * semantics — wildcards match a leading dot too — because a deny on `src/**` must not miss `src/.env`, and a deny
 * a dotfile name can slip past is no deny. A pattern the translator refuses (`!( )`, over the length limit) never
 * matches, and the config check reports it (`checkRuleGlob`).
 */

/** Compiled globs, by pattern (rules are few; the bound only guards against an unbounded stream of updates). */
const compiled = new Map<string, (value: string) => boolean>();
const MAX_COMPILED = 1_024;

function compile(glob: string): (value: string) => boolean {
  let matcher = compiled.get(glob);
  if (!matcher) {
    let test: (value: string) => boolean;
    try {
      const program = translateGlob(glob);
      const re = RE2JS.compile(program.source);
      // The subject is left unmarked (no `globSubject`): wildcards then accept a leading dot, which is what
      // `dot: true` means. A NUL (which the translator reserves for the marker) is kept from hiding a character.
      test = (value) => re.matcher(value.replaceAll('\u0000', '\u0001')).matches() !== program.negated;
    } catch {
      test = () => false;
    }
    matcher = test;
  }
  setRecent(compiled, glob, matcher, MAX_COMPILED);
  return matcher;
}

/** Whether `value` matches any of the globs. */
export function globMatches(globs: readonly string[], value: string): boolean {
  return globs.some((glob) => compile(glob)(value));
}

/** The reason a rule's glob cannot be used (for configuration errors), or undefined when it can. */
export function checkRuleGlob(glob: string): string | undefined {
  try {
    RE2JS.compile(translateGlob(glob).source);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}
