// A migration test's one shape on both stores: write with today's store, rewind the database by hand to how
// an older release left it, open it again (which migrates, or the test runs the statement itself), check.
import Database from "better-sqlite3";
import pg from "pg";
import { PgStore } from "../../conductor/db/postgres/pg-store.ts";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import type { Store } from "../../conductor/db/store.ts";

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
