import { describe, expect, it } from "vitest";
import { takeOverOrphans } from "../../conductor/cluster/takeover.ts";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { silentLogger } from "../../shared/log.ts";
import { fakeNode } from "../../scripts/bench/fleet.ts";
import { testMembership } from "../helpers/membership.ts";

/** Three conductors on one store with a clock the test moves; `a` stops heartbeating. */
async function cluster() {
  const store = new SqliteStore(":memory:");
  let now = 1_000_000;
  const member = (hostname: string) => testMembership(store, hostname, () => now);
  const a = member("c-a");
  const b = member("c-b");
  const c = member("c-c");
  for (const m of [a, b, c]) await m.join(null);
  for (const m of [a, b, c]) await m.refresh(); // the earlier joiners' rings have not seen c yet
  const nodes = await Promise.all(
    Array.from({ length: 24 }, () => store.createNode(fakeNode({ driver: "fake-hardware" }))),
  );
  const taken: { uuid: string; holder: string; cause: string }[] = [];
  const deps = {
    store,
    membership: b,
    logger: silentLogger,
    takeOver: async (uuid: string, holder: string, cause: string) => {
      taken.push({ uuid, holder, cause });
      await store.releaseNode(uuid, holder);
      return false;
    },
  };
  const later = async (seconds: number) => {
    now += seconds * 1000;
    await c.heartbeat();
    await b.heartbeat();
  };
  return { store, a, b, nodes, taken, deps, later };
}

describe("takeOverOrphans", () => {
  it("on a heartbeat frees the locks of registered conductors that died, on the nodes this one owns", async () => {
    const { store, a, b, nodes, taken, deps, later } = await cluster();
    for (const n of nodes.slice(0, 20)) await store.reserveNode(n.uuid, a.identity);
    await store.reserveNode(nodes[20]!.uuid, b.identity);
    expect(await takeOverOrphans(deps)).toEqual([]); // a is alive: nothing is an orphan

    await later(61); // a's last heartbeat is now older than dead-after
    const mine = nodes.slice(0, 20).filter((n) => b.owns(n));
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.length).toBeLessThan(20); // c, alive, owns the rest: b takes only its share
    const freed = await takeOverOrphans(deps);
    expect(freed.sort()).toEqual(mine.map((n) => n.uuid).sort());
    expect(
      taken.every((t) => t.holder === a.identity && t.cause === "Conductor c-a stopped heartbeating"),
    ).toBe(true);
    expect((await store.getNode(nodes[20]!.uuid))!.reservation).toBe(b.identity); // a live holder keeps its lock
    expect(await takeOverOrphans(deps)).toEqual([]); // nothing left of b's share
  });

  it("reads only the dead identities' locks on a heartbeat; at start every lock, so an unregistered holder's too", async () => {
    const { store, b, nodes, deps } = await cluster();
    const owned = nodes.filter((n) => b.owns(n));
    await store.reserveNode(owned[0]!.uuid, "ghost/0000"); // no conductor row names it
    const asked: string[][] = [];
    const listReservedBy = store.listReservedBy.bind(store);
    store.listReservedBy = async (holders) => {
      asked.push([...holders]);
      return listReservedBy(holders);
    };
    let fullReads = 0;
    const listNodeSummaries = store.listNodeSummaries.bind(store);
    store.listNodeSummaries = async (filter, page, columns) => {
      fullReads += 1;
      return listNodeSummaries(filter, page, columns);
    };

    expect(await takeOverOrphans(deps)).toEqual([]);
    expect(fullReads).toBe(0);
    expect(asked).toEqual([[]]); // everyone registered is alive

    expect(await takeOverOrphans(deps, { everyHolder: true })).toEqual([owned[0]!.uuid]);
    expect(fullReads).toBe(1);
  });
});
