// PostgreSQL's node_traits mirrors each node's id, class and claimability so that a claim by traits walks one
// index; these tests hold the mirror to the nodes it copies, whatever writes them, and the claim to that walk.
import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newNode } from "../../conductor/operations/node-record.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { candidateQuery } from "../../conductor/db/candidates.ts";
import { claimSelect, TRAIT_BATCH } from "../../conductor/db/postgres/claim-select.ts";
import { PG_MIGRATIONS } from "../../conductor/db/postgres/migrations.ts";
import { PgStore } from "../../conductor/db/postgres/pg-store.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import type { AllocationSpec, NodeRecord } from "../../shared/resources.ts";
import { startPostgres, type ThrowawayPostgres } from "../helpers/postgres.ts";

const fake = defaultDrivers(defaultConfig()).get("fake-hardware")!;
const freeNode = (fields: Partial<NodeRecord> = {}): NodeRecord => ({
  ...newNode({ driver: "fake-hardware" }, fake),
  provision_state: "available",
  power_state: "power off",
  ...fields,
});
const claimRequest = (resourceClass: string, traits: string[], spec: AllocationSpec | null = null) => ({
  resourceClass,
  traits,
  candidateNodes: [],
  spec,
});

/** Trait rows whose copy differs from their node (none, when the mirror is exact). */
const STALE = `
  SELECT t.node_uuid, t.trait FROM node_traits t JOIN nodes n ON n.uuid = t.node_uuid
  WHERE t.node_id <> n.id OR t.node_class IS DISTINCT FROM n.resource_class
    OR t.memory_mb IS DISTINCT FROM n.memory_mb OR t.cpus IS DISTINCT FROM n.cpus
    OR t.local_gb IS DISTINCT FROM n.local_gb
    OR t.claimable <> (n.provision_state = 'available' AND n.instance_uuid IS NULL
      AND n.power_state IS NOT NULL AND NOT n.maintenance)`;

let server: ThrowawayPostgres;
let url: string;
let store: PgStore;
let sql: pg.Client;

beforeAll(async () => {
  server = await startPostgres();
  url = await server.freshDatabase("mirror");
  store = new PgStore(url);
  await store.open();
  sql = new pg.Client({ connectionString: url });
  await sql.connect();
});

afterAll(async () => {
  await sql?.end();
  await store?.close();
  await server?.stop();
});

async function mirrorOf(uuid: string): Promise<{ claimable: boolean; node_class: string | null }[]> {
  const rows = await sql.query<{ claimable: boolean; node_class: string | null }>(
    "SELECT claimable, node_class FROM node_traits WHERE node_uuid = $1 ORDER BY trait",
    [uuid],
  );
  return rows.rows;
}

describe("PostgreSQL trait mirror", () => {
  it("follows every write of the node: create, claim, update, a plain UPDATE, class change, traits", async () => {
    const rc = `mirror-${randomUUID().slice(0, 8)}`;
    const node = await store.createNode(freeNode({ resource_class: rc, traits: ["CUSTOM_A", "CUSTOM_B"] }));
    expect(await mirrorOf(node.uuid)).toEqual([
      { claimable: true, node_class: rc },
      { claimable: true, node_class: rc },
    ]);
    // the claim writes only the node's row (no trait rewrite): the trigger follows it
    const claimed = await store.claimNode(randomUUID(), claimRequest(rc, ["CUSTOM_A"]));
    expect(claimed?.uuid).toBe(node.uuid);
    expect((await mirrorOf(node.uuid)).map((r) => r.claimable)).toEqual([false, false]);
    await store.updateNode(node.uuid, { instance_uuid: null, allocation_uuid: null });
    expect((await mirrorOf(node.uuid)).map((r) => r.claimable)).toEqual([true, true]);
    // a reservation is not mirrored (the claim checks the node's row), so taking one rewrites nothing
    await store.reserveNode(node.uuid, "busy");
    expect((await mirrorOf(node.uuid)).map((r) => r.claimable)).toEqual([true, true]);
    expect(await store.claimNode(randomUUID(), claimRequest(rc, ["CUSTOM_A"]))).toBeNull();
    await store.releaseNode(node.uuid, "busy");
    // any statement that writes the node, not only the store's
    const write = (patch: Record<string, unknown>) =>
      sql.query(
        `UPDATE nodes SET ${Object.keys(patch)
          .map((column, i) => `${column} = $${i + 2}`)
          .join(", ")}, doc = doc || $1::jsonb WHERE uuid = $${Object.keys(patch).length + 2}`,
        [JSON.stringify(patch), ...Object.values(patch), node.uuid],
      );
    await write({ maintenance: true });
    expect((await mirrorOf(node.uuid)).map((r) => r.claimable)).toEqual([false, false]);
    await write({ maintenance: false, resource_class: "other" });
    await write({ memory_mb: 4096 });
    expect((await sql.query(STALE)).rows).toEqual([]);
    expect(await mirrorOf(node.uuid)).toEqual([
      { claimable: true, node_class: "other" },
      { claimable: true, node_class: "other" },
    ]);
    await store.updateNode(node.uuid, { traits: ["CUSTOM_B"], provision_state: "manageable" });
    expect(await mirrorOf(node.uuid)).toEqual([{ claimable: false, node_class: "other" }]);
    expect((await sql.query(STALE)).rows).toEqual([]);
  });

  it("the migration fills the mirror of nodes stored before it", async () => {
    const oldUrl = await server.freshDatabase(`premirror_${randomUUID().slice(0, 8)}`);
    const old = new pg.Client({ connectionString: oldUrl });
    await old.connect();
    try {
      // the schema as it stood before the mirror (4 migrations), with nodes in several states
      await old.query("CREATE TABLE schema_version (version INTEGER NOT NULL)");
      for (const migration of PG_MIGRATIONS.slice(0, 4)) await old.query(migration);
      await old.query("INSERT INTO schema_version VALUES (4)");
      const nodes = [
        freeNode({ resource_class: "small", traits: ["CUSTOM_X"] }),
        freeNode({ resource_class: "small", traits: ["CUSTOM_X", "CUSTOM_Y"], maintenance: true }),
        freeNode({ resource_class: null, traits: ["CUSTOM_Y"], instance_uuid: randomUUID() }),
      ];
      for (const n of nodes) {
        await old.query(
          `INSERT INTO nodes (uuid, driver, provision_state, power_state, maintenance, instance_uuid,
             resource_class, created_at, doc) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
          [
            n.uuid,
            n.driver,
            n.provision_state,
            n.power_state,
            n.maintenance,
            n.instance_uuid,
            n.resource_class,
            n.created_at,
            JSON.stringify(n),
          ],
        );
        for (const trait of n.traits) {
          await old.query("INSERT INTO node_traits (node_uuid, trait) VALUES ($1, $2)", [n.uuid, trait]);
        }
      }
      const migrated = new PgStore(oldUrl);
      await migrated.open();
      try {
        const rows = await old.query<{ uuid: string; claimable: boolean }>(
          "SELECT node_uuid AS uuid, claimable FROM node_traits ORDER BY node_id, trait",
        );
        expect(rows.rows).toEqual([
          { uuid: nodes[0]!.uuid, claimable: true },
          { uuid: nodes[1]!.uuid, claimable: false },
          { uuid: nodes[1]!.uuid, claimable: false },
          { uuid: nodes[2]!.uuid, claimable: false },
        ]);
        expect((await old.query(STALE)).rows).toEqual([]);
        const claimed = await migrated.claimNode(randomUUID(), claimRequest("small", ["CUSTOM_X"]));
        expect(claimed?.uuid).toBe(nodes[0]!.uuid);
      } finally {
        await migrated.close();
      }
    } finally {
      await old.end();
    }
  });

  it("a claim by trait (with or without a spec) reads the trait's first fitting row, not the free nodes before it", async () => {
    const rc = `walk-${randomUUID().slice(0, 8)}`;
    const trait = "CUSTOM_WALK";
    // 1 node in 7 with the trait, as the bench fleet, in two sizes; the first claims take the front of the class
    for (let i = 0; i < 1400; i++) {
      const properties = { memory_mb: i % 2 ? 32768 : 16384, cpus: 8, local_gb: 500 };
      await store.createNode(freeNode({ resource_class: rc, traits: i % 7 ? [] : [trait], properties }));
    }
    const exact: AllocationSpec = { memory_mb: 32768, vcpus: 8, match: "exact" };
    for (let i = 0; i < 50; i++) {
      await store.claimNode(randomUUID(), claimRequest(rc, [trait]));
      await store.claimNode(randomUUID(), claimRequest(rc, [trait], exact));
    }
    await sql.query("ANALYZE");
    for (const [spec, index] of [
      [null, "node_traits_claimable"],
      [exact, "node_traits_claimable_fit"],
    ] as const) {
      const params: (string | number)[] = [];
      const query = candidateQuery(claimRequest(rc, [trait], spec), {
        param: (value) => `$${params.push(value)}`,
        false: "FALSE",
        traitRows: true,
      });
      const plan = await sql.query<{ "QUERY PLAN": unknown }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${claimSelect(query, TRAIT_BATCH)}`,
        params,
      );
      const text = JSON.stringify(plan.rows[0]!["QUERY PLAN"]);
      // the walk starts at the trait's first claimable (fitting) node: one row read, whatever was claimed before
      const scan = new RegExp(`"Index Name":"${index}"[^{}]*"Actual Rows":(\\d+)`).exec(text);
      expect(scan, text).not.toBeNull();
      expect(Number(scan![1])).toBe(1);
    }
    expect((await sql.query(STALE)).rows).toEqual([]);
  });
});
