import type SQLite from 'better-sqlite3';
import type { SqliteDatabase } from 'kysely';

/** Distinct SQL texts kept prepared; a step uses a few dozen, so this only bounds odd workloads (IN lists). */
const MAX_STATEMENTS = 500;

/**
 * The SQLite handle Kysely drives, with prepared statements reused. Kysely's SQLite driver prepares every query
 * again (`db.prepare(sql)` per execution), which was 7% of a step's CPU; a statement compiled once is reused for
 * the same SQL text, least recently used first out. Reuse is safe: the driver runs one query at a time on the
 * connection, and a statement is busy only while `iterate()` streams it, which gets a statement of its own.
 */
export function statementCache(database: SQLite.Database): SqliteDatabase {
  const statements = new Map<string, SQLite.Statement>();
  return {
    close: () => {
      statements.clear();
      database.close();
    },
    prepare(sql: string) {
      let statement = statements.get(sql);
      if (statement === undefined || statement.busy) {
        statement = database.prepare(sql);
        if (statements.size >= MAX_STATEMENTS) statements.delete(statements.keys().next().value as string);
      } else {
        statements.delete(sql); // re-inserted below: most recently used last
      }
      statements.set(sql, statement);
      return statement as unknown as ReturnType<SqliteDatabase['prepare']>;
    },
  };
}
