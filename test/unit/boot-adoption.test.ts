import { describe, expect, it } from "vitest";
import { BootAdoption, awaitsAdoption, type AdoptionDeps } from "../../conductor/cluster/takeover.ts";
import type { ConductorRecord, NodeRecord } from "../../shared/resources.ts";
import { silentLogger } from "../../shared/log.ts";

const ME = "c-b/2222";
const DEAD = "c-a/1111";
const LIVE = "c-c/3333";

function node(uuid: string, state: string, info: Record<string, unknown>): NodeRecord {
  return {
    uuid,
    provision_state: state,
    conductor_group: "",
    driver_internal_info: info,
  } as unknown as NodeRecord;
}

/** A fleet in memory, a membership whose live set the test moves, and an adoptBoot that may refuse (locked). */
function harness(nodes: NodeRecord[]) {
  const membership = {
    generation: 1,
    identity: ME,
    owns: () => true,
    isLiveIdentity: (identity: string) => identity === ME || identity === LIVE,
    alive: () => [{ identity: LIVE } as ConductorRecord],
  };
  const listed: string[] = [];
  const locked = new Set<string>();
  const adopted: string[] = [];
  const deps: AdoptionDeps = {
    store: {
      // the stores' rule, as a model: a preparer outside the live set, in a state that depends on it
      listOrphanedBoots: async ({ waitStates, live }) => {
        listed.push(live.join(","));
        return nodes.filter((n) => {
          const info = n.driver_internal_info;
          const by = waitStates.includes(n.provision_state)
            ? info.ramdisk_prepared_by
            : n.provision_state === "active"
              ? info.instance_prepared_by
              : undefined;
          return by !== undefined && by !== null && !live.includes(String(by));
        });
      },
    },
    membership,
    logger: silentLogger,
    adoptBoot: async (uuid) => {
      if (locked.has(uuid)) return false;
      adopted.push(uuid);
      // as the conductor does: the files are ours now
      const found = nodes.find((n) => n.uuid === uuid)!;
      const key = found.provision_state === "active" ? "instance_prepared_by" : "ramdisk_prepared_by";
      found.driver_internal_info = { ...found.driver_internal_info, [key]: ME };
      return true;
    },
  };
  return { deps, membership, listed, locked, adopted };
}

describe("which nodes a takeover re-writes boot files for", () => {
  it("a wait state or active node whose files a dead conductor wrote; not ours, not a live one's, not other states", () => {
    const membership = { identity: ME, isLiveIdentity: (id: string) => id === ME || id === LIVE };
    const cases: [string, Record<string, unknown>, boolean][] = [
      ["wait call-back", { ramdisk_prepared_by: DEAD }, true],
      ["clean wait", { ramdisk_prepared_by: LIVE }, false],
      ["inspect wait", { ramdisk_prepared_by: ME }, false],
      ["active", { instance_prepared_by: DEAD }, true],
      ["active", { ramdisk_prepared_by: DEAD }, false],
      ["deploying", { ramdisk_prepared_by: DEAD }, false],
      ["wait call-back", {}, false],
      ["wait call-back", { ramdisk_prepared_by: 42 }, false],
    ];
    for (const [state, info, expected] of cases) {
      expect(awaitsAdoption(node("n", state, info), membership), `${state} ${JSON.stringify(info)}`).toBe(
        expected,
      );
    }
  });
});

describe("BootAdoption", () => {
  it("scans at start, then only after the live conductors change or while a locked node is left", async () => {
    const nodes = [
      node("wait", "wait call-back", { ramdisk_prepared_by: DEAD }),
      node("active", "active", { instance_prepared_by: DEAD }),
      node("fine", "active", { instance_prepared_by: LIVE }),
    ];
    const h = harness(nodes);
    h.locked.add("active");
    const adoption = new BootAdoption(h.deps);

    expect(await adoption.run()).toEqual(["wait"]);
    const firstScan = h.listed.length;
    expect(firstScan).toBeGreaterThan(0);

    h.locked.clear(); // the lock is released: the pending node is retried without a membership change
    expect(await adoption.run()).toEqual(["active"]);
    expect(h.listed.length).toBe(firstScan * 2);

    expect(await adoption.run()).toEqual([]); // nothing changed, nothing left: no listing at all
    expect(h.listed.length).toBe(firstScan * 2);

    h.membership.generation += 1; // a conductor died or joined: look again (nothing is orphaned now)
    expect(await adoption.run()).toEqual([]);
    expect(h.listed.length).toBe(firstScan * 3);
    expect(h.adopted).toEqual(["wait", "active"]);
  });
});
