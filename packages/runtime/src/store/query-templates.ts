import { type Compilable, CompiledQuery, type QueryResult } from 'kysely';
import type { Db } from './store.js';

/**
 * Queries of the step's hot path whose SQL text is compiled once per shape and then reused with fresh parameters.
 * Why: building a Kysely query (parsing references, freezing nodes, the expression builder of a fenced `exists`)
 * and compiling it cost more CPU than SQLite spends executing it — about a tenth of a step over the five to ten
 * queries a step makes. The SQL text is a pure function of the query's shape, so `key` must name everything that
 * changes the text (the number of rows of an insert, whether a fence applies) and nothing else.
 *
 * The first execution of a key compiles the builder and checks that `parameters` (what later executions bind) are
 * exactly the compiled ones, in the same order; a shape whose parameters are not is never reused, only built every
 * time (correct, just not faster). A template belongs to one store (one dialect).
 */
export class QueryTemplates {
  private readonly texts = new Map<string, string | null>();

  /** Run the query of shape `key` with `parameters` (the values `build()` binds, in its order). */
  execute<R>(db: Db, key: string, build: () => Compilable<R>, parameters: readonly unknown[]): Promise<QueryResult<R>> {
    const text = this.texts.get(key);
    if (typeof text === 'string') return db.executeQuery<R>(CompiledQuery.raw(text, parameters as unknown[]));
    const compiled = build().compile();
    if (text === undefined) {
      // null: checked once and found different, so always built (see the class comment).
      this.texts.set(key, sameParameters(compiled.parameters, parameters) ? compiled.sql : null);
      // A bounded number of shapes (an insert of many rows is one shape per row count).
      if (this.texts.size > MAX_TEMPLATES) this.texts.delete(this.texts.keys().next().value as string);
    }
    return db.executeQuery(compiled);
  }

  /** The shapes whose text is reused (for tests). */
  reused(): string[] {
    return [...this.texts].filter(([, text]) => text !== null).map(([key]) => key);
  }
}

const MAX_TEMPLATES = 200;

function sameParameters(compiled: readonly unknown[], given: readonly unknown[]): boolean {
  return compiled.length === given.length && compiled.every((value, index) => Object.is(value, given[index]));
}
