import { describe, expect, it } from "vitest";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { fakeNode } from "../../scripts/bench/fleet.ts";
import { testMembership } from "../helpers/membership.ts";

describe("Membership.join", () => {
  it("restarts do not pile up registrations: a name keeps its latest row, and dead ones that hold a lock", async () => {
    const store = new SqliteStore(":memory:");
    let now = 1_000_000;
    const start = async () => {
      const m = testMembership(store, "c-a", () => now);
      await m.join(null);
      return m;
    };
    const node = await store.createNode(fakeNode({ driver: "fake-hardware" }));
    const first = await start();
    await store.reserveNode(node.uuid, first.identity); // it dies holding this lock
    let last = first;
    for (let i = 0; i < 5; i++) {
      now += 61_000; // the previous process stopped heartbeating long enough to be dead
      last = await start();
    }
    const rows = (await store.listConductors()).map((r) => r.identity);
    expect(rows.sort()).toEqual([first.identity, last.identity].sort());
    expect(last.isLiveIdentity(first.identity)).toBe(false);
  });
});
