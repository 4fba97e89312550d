import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { defaultConfig } from "../../conductor/config.ts";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { Duplicate } from "../../conductor/db/store.ts";
import { fakeHardware } from "../../conductor/drivers/registry.ts";
import { newNode } from "../../conductor/operations/node-record.ts";
import type { NodeHistoryRecord } from "../../shared/history.ts";

const hw = fakeHardware(defaultConfig());
const node = (name: string, traits: string[] = []) => ({
  ...newNode({ driver: "fake-hardware", name }, hw),
  traits,
});
const historyOf = (nodeUuid: string): NodeHistoryRecord => ({
  uuid: randomUUID(),
  node_uuid: nodeUuid,
  created_at: new Date().toISOString(),
  severity: "INFO",
  event: "Node created by test",
  event_type: "create",
  conductor: "test",
  user: null,
  project: null,
  remote_address: null,
  request_id: null,
  changes: null,
  state: "enroll",
  target_provision_state: null,
  duration_seconds: null,
});

let dir: string;
let store: SqliteStore;
/** A second connection to the same file: sees only what was committed. */
let reader: Database.Database;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "anvil-group-commit-"));
  store = new SqliteStore(join(dir, "db.sqlite"));
  reader = new Database(join(dir, "db.sqlite"), { readonly: true });
});
afterEach(async () => {
  reader.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const committed = (uuid: string): boolean =>
  reader.prepare("SELECT 1 FROM nodes WHERE uuid = ?").get(uuid) !== undefined;

describe("SQLite group commit of node creates and history rows", () => {
  it("answers each create only after its COMMIT, and a duplicate fails alone", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom("a", "b", "c", "d", "e", "f"), { minLength: 1, maxLength: 12 }),
        fc.array(fc.constantFrom("CUSTOM_X", "CUSTOM_Y"), { maxLength: 3 }),
        async (names, traits) => {
          const prefix = randomUUID().slice(0, 8);
          const records = names.map((name) => node(`${prefix}-${name}`, traits));
          // all issued in one tick: they share a group
          const outcomes = await Promise.allSettled(
            records.map((record) =>
              store.createNode(record).then((created) => {
                // checked synchronously as the caller is answered: another connection sees the row
                expect(committed(created.uuid)).toBe(true);
                return created;
              }),
            ),
          );
          const firstOfName = new Set(names.map((name) => names.indexOf(name)));
          outcomes.forEach((outcome, i) => {
            if (firstOfName.has(i)) {
              expect(outcome.status).toBe("fulfilled");
            } else {
              expect(outcome.status).toBe("rejected");
              expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(Duplicate);
              expect(committed(records[i]!.uuid)).toBe(false);
            }
          });
          for (const i of firstOfName) {
            const stored = await store.getNode(records[i]!.uuid);
            expect(stored?.name).toBe(records[i]!.name);
            const rows = reader
              .prepare("SELECT trait FROM node_traits WHERE node_uuid = ? ORDER BY trait")
              .all(records[i]!.uuid) as { trait: string }[];
            expect(rows.map((row) => row.trait)).toEqual([...new Set(traits)].sort());
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  it("keeps a node whose group also held a history row that could not be stored", async () => {
    const good = node("kept");
    const [created, orphan, history] = await Promise.allSettled([
      store.createNode(good),
      store.addNodeHistory(historyOf(randomUUID())), // no such node: the foreign key refuses it
      store.addNodeHistory(historyOf(good.uuid)), // queued after its node in the same group
    ]);
    expect(created.status).toBe("fulfilled");
    expect(orphan.status).toBe("rejected");
    expect(history.status).toBe("fulfilled");
    expect(committed(good.uuid)).toBe(true);
    const entries = await store.listNodeHistory(good.uuid, {});
    expect(entries.map((entry) => entry.node_uuid)).toEqual([good.uuid]);
  });

  it("lets reads and transactions issued meanwhile see either none or all of a group", async () => {
    const records = ["p", "q", "r", "s"].map((name) => node(name));
    const creates = records.map((record) => store.createNode(record));
    const during = store.listNodes({}, {});
    await Promise.all(creates);
    const seen = (await during).length;
    expect([0, records.length]).toContain(seen);
    expect(await store.listNodes({}, {})).toHaveLength(records.length);
  });
});
