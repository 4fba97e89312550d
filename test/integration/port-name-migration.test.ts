import { describe, expect, it } from "vitest";
import { PG_MIGRATIONS } from "../../conductor/db/postgres/migrations.ts";
import { MIGRATIONS } from "../../conductor/db/sqlite/migrations.ts";
import type { Store } from "../../conductor/db/store.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { newNode } from "../../conductor/operations/node-record.ts";
import { newPortRecord } from "../../shared/resources.ts";
import { migrationFixtures, rewoundPostgres, rewoundSqlite } from "../helpers/migration-rewind.ts";

/**
 * The 1.88 migration on a database written before it, where port names were stored in the documents only
 * (hidden, not unique): each name stays on its oldest port, the others lose it, and names are then unique
 * and found. The "before" schema is made by undoing the migration's column on a current database.
 */
const fake = defaultDrivers(defaultConfig()).get("fake-hardware")!;

/** Three ports named dup, dup, solo (oldest first) and one unnamed, written by the current store. */
async function seed(store: Store): Promise<string[]> {
  const node = await store.createNode(newNode({ driver: "fake-hardware" }, fake));
  const uuids: string[] = [];
  for (const [i, name] of ["first", "second", "solo", null].entries()) {
    const port = newPortRecord({ address: `52:54:00:aa:00:0${i}`, node_uuid: node.uuid, name });
    uuids.push((await store.createPort(port)).uuid);
  }
  return uuids;
}

async function checkMigrated(store: Store, uuids: string[]): Promise<void> {
  const names = await Promise.all(uuids.map(async (u) => (await store.getPort(u))?.name));
  expect(names).toEqual(["dup", null, "solo", null]);
  expect((await store.getPort("dup"))?.uuid).toBe(uuids[0]);
  expect((await store.getPort("solo"))?.uuid).toBe(uuids[2]);
  await expect(store.updatePort(uuids[1]!, { name: "dup" })).rejects.toThrow(
    "A port with name dup already exists.",
  );
}

/** Where the 1.88 migration stands in a list: the database is set back to just before it. */
const portNameAt = (migrations: readonly string[]): number =>
  migrations.findIndex((m) => m.includes("CREATE UNIQUE INDEX ports_name"));

/**
 * The tables the migrations after the 1.88 one create, dropped so that opening the store runs them again as
 * on a database from before 1.88. A later migration that alters an older table must be undone here too (as
 * the rewinds below drop the trigger that keeps the nodes' shown texts).
 */
const tablesAfterPortNames = (migrations: readonly string[]): string[] =>
  migrations
    .slice(portNameAt(migrations) + 1)
    .flatMap((m) => [...m.matchAll(/CREATE TABLE (\w+)/g)].map((match) => match[1]!));

describe("the 1.88 port name migration", () => {
  const db = migrationFixtures("port-name");

  it("SQLite: keeps each name on its oldest port and makes names unique", () =>
    rewoundSqlite(db.sqlite("old.sqlite"), {
      seed,
      check: checkMigrated,
      rewind(raw) {
        raw.exec(`DROP INDEX ports_name; ALTER TABLE ports DROP COLUMN name;
          UPDATE ports SET doc = json_set(doc, '$.name', 'dup') WHERE json_extract(doc, '$.name') IN ('first', 'second');`);
        raw.exec("DROP TRIGGER node_shown_stale");
        for (const table of tablesAfterPortNames(MIGRATIONS)) raw.exec(`DROP TABLE ${table}`);
        raw.pragma(`user_version = ${portNameAt(MIGRATIONS)}`);
      },
    }));

  it("PostgreSQL: the same", async () =>
    rewoundPostgres(await db.postgres("portnames"), {
      seed,
      check: checkMigrated,
      async rewind(sql) {
        await sql.query(`ALTER TABLE ports DROP COLUMN name;
          UPDATE ports SET doc = jsonb_set(doc, '{name}', '"dup"') WHERE doc ->> 'name' IN ('first', 'second');`);
        await sql.query("DROP TRIGGER node_shown_stale ON nodes; DROP FUNCTION node_shown_stale()");
        for (const table of tablesAfterPortNames(PG_MIGRATIONS)) await sql.query(`DROP TABLE ${table}`);
        await sql.query("UPDATE schema_version SET version = $1", [portNameAt(PG_MIGRATIONS)]);
      },
    }));
});
