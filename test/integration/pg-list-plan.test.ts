// A node list hides 1.83's child nodes; on PostgreSQL the condition that does it must not depend on table
// statistics, which a freshly filled table lacks until autovacuum first analyses it (the cluster bench lists
// within that minute). These tests plan the store's own list statements on such a table.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { shownRowsOf } from "../helpers/shown-rows.ts";
import { newNode } from "../../conductor/operations/node-record.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { PgStore } from "../../conductor/db/postgres/pg-store.ts";
import type { SqlValue } from "../../conductor/db/sql/dialect.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import { startPostgres, type ThrowawayPostgres } from "../helpers/postgres.ts";

const fake = defaultDrivers(defaultConfig()).get("fake-hardware")!;
const NODES = 20_000;
const LIMIT = 1000;

/** A PgStore that keeps the text and parameters of every read it sends. */
class RecordingPgStore extends PgStore {
  readonly reads: { sql: string; values: readonly SqlValue[] }[] = [];
  constructor(url: string) {
    super(url);
    const all = this.d.all.bind(this.d);
    this.d.all = <R>(sql: string, values: readonly SqlValue[], options?: { raw?: boolean }) => {
      this.reads.push({ sql, values });
      return all<R>(sql, values, options);
    };
    const rawRows = this.d.rawRows.bind(this.d);
    this.d.rawRows = (sql: string, values: readonly SqlValue[], columns: number) => {
      this.reads.push({ sql, values });
      return rawRows(sql, values, columns);
    };
  }
}

let server: ThrowawayPostgres;
let store: RecordingPgStore;
let sql: pg.Client;
let parent: string;

beforeAll(async () => {
  server = await startPostgres();
  const url = await server.freshDatabase("listplan");
  store = new RecordingPgStore(url);
  await store.open();
  sql = new pg.Client({ connectionString: url });
  await sql.connect();
  await sql.query("ALTER TABLE nodes SET (autovacuum_enabled = false)");
  parent = (await store.createNode(newNode({ driver: "fake-hardware" }, fake))).uuid;
  await store.createNode(newNode({ driver: "fake-hardware", parent_node: parent }, fake));
  // the bench's fleet in one statement: copies of the first node's document under new uuids
  await sql.query(
    `INSERT INTO nodes (uuid, driver, provision_state, conductor_group, created_at, capabilities, doc)
     SELECT u, driver, provision_state, conductor_group, created_at, capabilities,
            jsonb_set(doc, '{uuid}', to_jsonb(u))
     FROM (SELECT gen_random_uuid()::text AS u FROM generate_series(1, $1::int)) fresh,
          (SELECT * FROM nodes WHERE uuid = $2) template`,
    [NODES, parent],
  );
  // as a freshly filled table is before its first analysis: no column statistics
  await sql.query("DELETE FROM pg_statistic WHERE starelid = 'nodes'::regclass");
}, 120_000);

afterAll(async () => {
  await sql?.end();
  await store?.close();
  await server?.stop();
});

/** The plan of `text` as run (EXPLAIN ANALYZE), as JSON text. */
async function plan(text: string, values: readonly SqlValue[]): Promise<string> {
  const result = await sql.query<{ "QUERY PLAN": unknown }>(
    `EXPLAIN (ANALYZE, FORMAT JSON) ${text}`,
    values as unknown[],
  );
  return JSON.stringify(result.rows[0]!["QUERY PLAN"]);
}

describe("PostgreSQL node lists without table statistics", () => {
  it("the setup is a table the planner has no statistics on (the old NOT IN form scans every node)", async () => {
    const old = await plan(
      `SELECT uuid FROM nodes WHERE uuid NOT IN (SELECT uuid FROM nodes WHERE parent_node IS NOT NULL)
       ORDER BY id LIMIT ${LIMIT}`,
      [],
    );
    expect(old).toContain('"Node Type":"Seq Scan"');
  });

  for (const [name, list] of [
    [
      "the default page (stored JSON)",
      () => store.listNodeSummaryJson({ exclude_children: true }, { limit: LIMIT }, "http://h"),
    ],
    ["a detail page", () => store.listNodes({ exclude_children: true }, { limit: LIMIT })],
    [
      "a detail page from the shown texts (read as bytes)",
      // the fleet was copied in by SQL, without shown texts: the page is the view path's (null), but read
      async () => (await shownRowsOf(store, { exclude_children: true }, { limit: LIMIT })) === null,
    ],
    ["a later page", () => store.listNodes({ exclude_children: true }, { limit: LIMIT, marker: parent })],
  ] as const) {
    it(`${name} walks the primary key to its limit, hiding children, instead of reading every node`, async () => {
      store.reads.length = 0;
      const page = await list();
      expect(page).toBeTruthy();
      const [read] = store.reads;
      expect(read).toBeDefined();
      const text = await plan(read!.sql, read!.values);
      expect(text).not.toContain('"Node Type":"Seq Scan"');
      expect(text).not.toContain('"Node Type":"Sort"');
      expect(text).toContain('"Index Name":"nodes_pkey"');
    });
  }

  it("the page hides the child and keeps its parent", async () => {
    const nodes = await store.listNodes({ exclude_children: true }, { limit: 5 });
    expect(nodes.map((n) => n.uuid)).toContain(parent);
    expect(nodes.every((n) => n.parent_node === null || n.parent_node === undefined)).toBe(true);
    const all = await store.listNodes({}, { limit: 5 });
    expect(all.some((n) => n.parent_node === parent)).toBe(true);
  });
});
