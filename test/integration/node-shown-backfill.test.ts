import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { shownRowsOf } from "../helpers/shown-rows.ts";
import type { Identity } from "../../conductor/auth/identity.ts";
import { redactNodeView } from "../../conductor/auth/node-access.ts";
import { shownNodesJson } from "../../conductor/api/node-shown-page.ts";
import { nodeView, type ViewContext } from "../../conductor/api/views.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import { SHOWN_FORM } from "../../conductor/db/node-shown.ts";
import { MIGRATIONS } from "../../conductor/db/sqlite/migrations.ts";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import type { Store } from "../../conductor/db/store.ts";
import { newNode } from "../../conductor/operations/node-record.ts";

const fake = defaultDrivers(defaultConfig()).get("fake-hardware")!;
const ctx: ViewContext = { minor: 110, baseUrl: "http://h", conductorOf: () => "c1" };
const lessee: Identity = { user: "u", role: "member", project: "B", method: "http_basic" };

/** The node_shown row of the node whose uuid is the statement's one parameter. */
const OF_NODE = "node_id = (SELECT id FROM nodes WHERE uuid = ?)";

let dir = "";
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Three nodes in a SQLite file (one leased to project B, one with a BMC password). */
async function fleet(): Promise<{ file: string; uuids: string[] }> {
  dir = mkdtempSync(join(tmpdir(), "anvil-shown-"));
  const file = join(dir, "anvil.sqlite");
  const store = new SqliteStore(file);
  const uuids: string[] = [];
  for (const fields of [
    { lessee: "B" },
    { driver_info: { ipmi_password: "pw", ipmi_address: "10.0.0.9" } },
    {},
  ]) {
    const node = { ...newNode({ driver: "fake-hardware" }, fake), ...fields, last_error: "bmc said no" };
    uuids.push((await store.createNode(node)).uuid);
  }
  await store.close();
  return { file, uuids };
}

/** The detail page from the shown texts equals the view path's, for an admin and for a lessee. */
async function expectServedAsViews(store: Store): Promise<void> {
  const rows = await shownRowsOf(store, {});
  expect(rows).not.toBeNull();
  const nodes = await store.listNodes({}, {});
  for (const who of [lessee, { ...lessee, role: "admin" as const, project: null }]) {
    const views = nodes.map((node) => redactNodeView(nodeView(node, ctx, { detail: true }), who, node));
    expect(shownNodesJson(rows!, ctx, who).toString("utf8")).toBe(JSON.stringify(views));
  }
}

describe("node shown texts written for rows stored without one", () => {
  it("a row without a text, or with another form's, sends the page to the view path until the fill", async () => {
    const { file, uuids } = await fleet();
    const raw = new Database(file);
    raw.prepare(`DELETE FROM node_shown WHERE ${OF_NODE}`).run(uuids[0]);
    raw
      .prepare(`UPDATE node_shown SET shown_cuts = ? WHERE ${OF_NODE}`)
      .run("0:older/1,2,3,4,5,6,7,8", uuids[1]);
    raw.close();
    const store = new SqliteStore(file);
    try {
      expect(await shownRowsOf(store, {})).toBeNull();
      expect(await store.fillShownTexts()).toBe(2);
      expect(await store.fillShownTexts()).toBe(0);
      await expectServedAsViews(store);
    } finally {
      await store.close();
    }
  });

  it("a document that is no node is marked for the view path, and the fill ends", async () => {
    const { file, uuids } = await fleet();
    const raw = new Database(file);
    // the write of the document deletes the node's text (the trigger)
    raw.prepare("UPDATE nodes SET doc = '{not json' WHERE uuid = ?").run(uuids[2]);
    expect(raw.prepare(`SELECT 1 FROM node_shown WHERE ${OF_NODE}`).all(uuids[2])).toEqual([]);
    raw.close();
    const store = new SqliteStore(file);
    try {
      expect(await store.fillShownTexts(1)).toBe(1);
      const reader = new Database(file);
      const [row] = reader.prepare(`SELECT shown, shown_cuts FROM node_shown WHERE ${OF_NODE}`).all(uuids[2]);
      reader.close();
      expect(row).toEqual({ shown: null, shown_cuts: `${SHOWN_FORM}/` });
      expect(await shownRowsOf(store, {})).toBeNull();
    } finally {
      await store.close();
    }
  });

  it("a database migrated to the shown columns has every node's text after it opens", async () => {
    const { file } = await fleet();
    const raw = new Database(file);
    // the schema as it was before the migration that adds the columns (NOTE: migrations appended after it
    // run again here: each must be one that can, or this test goes back to that schema another way)
    const adds = MIGRATIONS.findIndex((sql) => sql.includes("ADD COLUMN shown TEXT"));
    expect(adds).toBe(MIGRATIONS.length - 2);
    // the next migration moved the columns to a table of their own, kept by a trigger
    raw.exec("DROP TRIGGER node_shown_stale; DROP TABLE node_shown");
    raw.pragma(`user_version = ${adds}`);
    raw.close();
    const store = new SqliteStore(file);
    try {
      await expectServedAsViews(store);
    } finally {
      await store.close();
    }
  });
});
