import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { PG_MIGRATIONS } from "../../conductor/db/postgres/migrations.ts";
import { MIGRATIONS } from "../../conductor/db/sqlite/migrations.ts";
import type { Store } from "../../conductor/db/store.ts";
import { migrationFixtures, rewoundPostgres, rewoundSqlite } from "../helpers/migration-rewind.ts";

/**
 * The 1.112 migration on a database written before it, whose runbooks had no traits (a node ran one by its
 * name): each gets its name as its one trait, as Ironic's online migrate_runbook_names_to_traits; a runbook
 * that already has traits keeps them. The "before" state is made by removing the key; the migration's own
 * statement is then run (setting the version back would also run the later ones, which need not be repeatable).
 */
const at = (migrations: readonly string[]): number =>
  migrations.findIndex((m) => m.includes("1.112 runbook"));

async function seed(store: Store): Promise<{ old: string; set: string }> {
  const make = (name: string, traits: string[]) =>
    store.createRunbook({
      uuid: randomUUID(),
      name,
      description: null,
      traits,
      steps: [{ interface: "raid", step: "delete_configuration", args: {}, order: 0 }],
      disable_ramdisk: false,
      extra: {},
      public: false,
      owner: null,
      created_at: new Date().toISOString(),
      updated_at: null,
    });
  return { old: (await make("CUSTOM_OLD", [])).uuid, set: (await make("CUSTOM_SET", ["CUSTOM_X"])).uuid };
}

async function check(store: Store, seeded: { old: string; set: string }): Promise<void> {
  expect((await store.getRunbook(seeded.old))?.traits).toEqual(["CUSTOM_OLD"]);
  expect((await store.getRunbook(seeded.set))?.traits).toEqual(["CUSTOM_X"]);
}

describe("the 1.112 runbook traits migration", () => {
  const db = migrationFixtures("runbook-traits");

  it("is in both stores' migrations", () => {
    expect(at(MIGRATIONS)).toBeGreaterThan(0);
    expect(at(PG_MIGRATIONS)).toBeGreaterThan(0);
  });

  it("SQLite: a runbook without traits takes its name", () =>
    rewoundSqlite(db.sqlite("old.sqlite"), {
      seed,
      check,
      rewind(raw) {
        raw.exec(`UPDATE runbooks SET doc = json_remove(doc, '$.traits') WHERE name = 'CUSTOM_OLD'`);
        raw.exec(MIGRATIONS[at(MIGRATIONS)]!);
      },
    }));

  it("PostgreSQL: the same", async () =>
    rewoundPostgres(await db.postgres("runbooktraits"), {
      seed,
      check,
      async rewind(sql) {
        await sql.query(`UPDATE runbooks SET doc = doc - 'traits' WHERE name = 'CUSTOM_OLD'`);
        await sql.query(PG_MIGRATIONS[at(PG_MIGRATIONS)]!);
      },
    }));
});
