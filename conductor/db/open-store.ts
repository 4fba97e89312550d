import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { PgStore } from "./postgres/pg-store.ts";
import { SqliteStore } from "./sqlite/sqlite-store.ts";
import type { Store } from "./store.ts";

/** Is the --db value a PostgreSQL URL (the cluster store) rather than a SQLite file? */
export function isPostgresUrl(database: string): boolean {
  return /^postgres(ql)?:\/\//.test(database);
}

/** `postgresql://…` opens the PostgreSQL store; anything else is a SQLite file (":memory:" for a throwaway). */
export function openStore(database: string): Store {
  if (isPostgresUrl(database)) return new PgStore(database);
  if (database !== ":memory:") mkdirSync(dirname(database), { recursive: true });
  return new SqliteStore(database);
}
