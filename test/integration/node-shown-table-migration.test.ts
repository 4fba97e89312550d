import { describe, expect, it } from "vitest";
import { shownRowsOf } from "../helpers/shown-rows.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { MIGRATIONS } from "../../conductor/db/sqlite/migrations.ts";
import { PG_MIGRATIONS } from "../../conductor/db/postgres/migrations.ts";
import type { ShownNode, Store } from "../../conductor/db/store.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import { newNode } from "../../conductor/operations/node-record.ts";
import { migrationFixtures, rewoundPostgres, rewoundSqlite } from "../helpers/migration-rewind.ts";

/**
 * The migration that moves the nodes' shown texts from two columns of the node rows to the node_shown table,
 * on a database the previous release left (texts in the rows): every text is moved, the columns are gone,
 * and a later write of a node replaces its text. The "before" schema is made by undoing the migration.
 */
const fake = defaultDrivers(defaultConfig()).get("fake-hardware")!;

type Seeded = { uuids: string[]; texts: ShownNode[] };

async function seed(store: Store): Promise<Seeded> {
  const uuids: string[] = [];
  for (const fields of [{ lessee: "B" }, { driver_info: { ipmi_password: "pw" } }, {}]) {
    uuids.push((await store.createNode({ ...newNode({ driver: "fake-hardware" }, fake), ...fields })).uuid);
  }
  const texts = await shownRowsOf(store, {});
  expect(texts).toHaveLength(3);
  return { uuids, texts: texts ?? [] };
}

async function check(store: Store, { uuids, texts }: Seeded): Promise<void> {
  expect(await shownRowsOf(store, {})).toEqual(texts);
  await store.updateNode(uuids[0]!, { description: "after the move" });
  const [first] = (await shownRowsOf(store, {})) ?? [];
  // text (SQLite) or its bytes (PostgreSQL, read by a binary COPY)
  expect(String(first?.shown)).toContain('"description":"after the move"');
}

/** The last migration is the move; the database is set back to just before it. */
const moveAt = (migrations: readonly string[]): number => {
  const at = migrations.findIndex((m) => m.includes("CREATE TABLE node_shown"));
  expect(at).toBe(migrations.length - 1);
  return at;
};

/** SQLite: the texts back in the node rows, the table and its trigger gone. */
const SQLITE_REWIND = `ALTER TABLE nodes ADD COLUMN shown TEXT; ALTER TABLE nodes ADD COLUMN shown_cuts TEXT;
  UPDATE nodes SET (shown, shown_cuts) = (SELECT shown, shown_cuts FROM node_shown WHERE node_id = id);
  DROP TRIGGER node_shown_stale; DROP TABLE node_shown;`;

describe("the move of the shown texts to node_shown", () => {
  const db = migrationFixtures("shown-move");

  it("SQLite: each text moves to node_shown and the node rows lose the columns", () =>
    rewoundSqlite(db.sqlite("old.sqlite"), {
      seed,
      check,
      rewind(raw) {
        raw.exec(SQLITE_REWIND);
        raw.pragma(`user_version = ${moveAt(MIGRATIONS)}`);
        // the move itself, as the store runs it on open (which then also writes every node again)
        raw.exec(MIGRATIONS[moveAt(MIGRATIONS)]!);
        const columns = raw.prepare("SELECT name FROM pragma_table_info('nodes')").pluck().all();
        expect(columns).not.toContain("shown");
        expect(raw.prepare("SELECT count(*) FROM node_shown WHERE shown IS NOT NULL").pluck().get()).toBe(3);
        raw.exec(SQLITE_REWIND);
      },
    }));

  it("PostgreSQL: the same (no rewrite of the nodes after it: the moved texts are served)", async () =>
    rewoundPostgres(await db.postgres("shownmove"), {
      seed,
      check,
      async rewind(sql) {
        await sql.query(`ALTER TABLE nodes ADD COLUMN shown TEXT, ADD COLUMN shown_cuts TEXT;
          UPDATE nodes SET shown = s.shown, shown_cuts = s.shown_cuts FROM node_shown s WHERE s.node_id = nodes.id;
          DROP TRIGGER node_shown_stale ON nodes; DROP FUNCTION node_shown_stale(); DROP TABLE node_shown;`);
        await sql.query("UPDATE schema_version SET version = $1", [moveAt(PG_MIGRATIONS)]);
      },
    }));
});
