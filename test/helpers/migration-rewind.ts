// A migration test's one shape on both stores: write with today's store, rewind the database by hand to how
// an older release left it, open it again (which migrates, or the test runs the statement itself), check.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, beforeAll } from "vitest";
import { PgStore } from "../../conductor/db/postgres/pg-store.ts";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import type { Store } from "../../conductor/db/store.ts";
import { startPostgres, type ThrowawayPostgres } from "./postgres.ts";

/**
 * A migration suite's fixtures, made in its describe: a temporary folder for SQLite files (`sqlite(name)`) and
 * a throwaway PostgreSQL server (`postgres(name)`: a fresh database's URL), both gone after the suite.
 */
export function migrationFixtures(prefix: string): {
  sqlite(name: string): string;
  postgres(name: string): Promise<string>;
} {
  const dir = mkdtempSync(join(tmpdir(), `anvil-${prefix}-`));
  let server: ThrowawayPostgres | undefined;
  beforeAll(async () => {
    server = await startPostgres();
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    sqlite: (name) => join(dir, name),
    postgres: async (name) => {
      if (!server) throw new Error("the PostgreSQL server is not up (used outside a test?)");
      return server.freshDatabase(name);
    },
  };
}

export interface Rewound<T> {
  seed(store: Store): Promise<T>;
  check(store: Store, seeded: T): Promise<void>;
}

export async function rewoundSqlite<T>(
  path: string,
  test: Rewound<T> & { rewind(raw: Database.Database): void },
): Promise<void> {
  const current = new SqliteStore(path);
  const seeded = await test.seed(current);
  await current.close();
  const raw = new Database(path);
  try {
    test.rewind(raw);
  } finally {
    raw.close();
  }
  const migrated = new SqliteStore(path);
  try {
    await test.check(migrated, seeded);
  } finally {
    await migrated.close();
  }
}

export async function rewoundPostgres<T>(
  url: string,
  test: Rewound<T> & { rewind(sql: pg.Client): Promise<void> },
): Promise<void> {
  const current = new PgStore(url);
  await current.open();
  const seeded = await test.seed(current);
  await current.close();
  const sql = new pg.Client({ connectionString: url });
  await sql.connect();
  try {
    await test.rewind(sql);
  } finally {
    await sql.end();
  }
  const migrated = new PgStore(url);
  await migrated.open();
  try {
    await test.check(migrated, seeded);
  } finally {
    await migrated.close();
  }
}
