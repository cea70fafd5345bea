/** The store's SQL dialects: an embedded SQLite file, or a PostgreSQL server for many processes. */
export type Dialect = 'sqlite' | 'postgres';
