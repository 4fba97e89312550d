import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { newNode } from "../../conductor/operations/node-record.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import {
  ConductorAlreadyRegistered,
  Duplicate,
  NodeLocked,
  NodeNotFound,
  NotFound,
  type Store,
} from "../../conductor/db/store.ts";
import {
  type AllocationRecord,
  type ConductorRecord,
  type NodeRecord,
  type PortRecord,
  newPortRecord,
} from "../../shared/resources.ts";
import type { NodeHistoryRecord } from "../../shared/history.ts";
import type { ProvisionState } from "../../shared/states.ts";
import { useStores, type StoreHarness } from "./harness.ts";

const fake = defaultDrivers(defaultConfig()).get("fake-hardware")!;

function node(fields: Partial<NodeRecord> = {}): NodeRecord {
  return { ...newNode({ driver: "fake-hardware" }, fake), ...fields };
}
function freeNode(fields: Partial<NodeRecord> = {}): NodeRecord {
  return node({ provision_state: "available", power_state: "power off", ...fields });
}
function port(nodeUuid: string, address: string): PortRecord {
  return newPortRecord({ address, node_uuid: nodeUuid });
}
function allocation(fields: Partial<AllocationRecord> = {}): AllocationRecord {
  return {
    uuid: randomUUID(),
    name: null,
    state: "allocating",
    node_uuid: null,
    resource_class: null,
    traits: [],
    candidate_nodes: [],
    spec: null,
    last_error: null,
    extra: {},
    owner: null,
    created_at: new Date().toISOString(),
    updated_at: null,
    ...fields,
  };
}
let conductorsMade = 0;

function conductor(hostname: string, fields: Partial<ConductorRecord> = {}): ConductorRecord {
  // later rows are created later: lists order by created_at, and two rows in one millisecond would tie
  conductorsMade++;
  return {
    identity: `${hostname}/${randomUUID().slice(0, 8)}`,
    hostname,
    conductor_group: "",
    drivers: ["fake-hardware"],
    url: null,
    machine: "contract",
    pid: 1,
    created_at: new Date(Date.UTC(2026, 0, 1) + conductorsMade).toISOString(),
    heartbeat_at: 1_000_000,
    online: true,
    ...fields,
  };
}
const request = (fields: Partial<Parameters<Store["claimNode"]>[1]> = {}) => ({
  resourceClass: null,
  traits: [],
  candidateNodes: [],
  spec: null,
  ...fields,
});

/**
 * The behaviour every Store must have, run against each implementation. `open` gives a store on an empty
 * database; `openSecond` (optional) a second, independent connection to the same database (another conductor).
 */
export function storeContract(name: string, harness: StoreHarness): void {
  describe(`Store contract: ${name}`, () => {
    let store: Store;
    let second: Store | undefined;
    useStores(harness, (opened, other) => {
      store = opened;
      second = other;
    });

    it("creates nodes and finds them by uuid or name; names and instances are unique", async () => {
      const a = await store.createNode(node({ name: "contract-a" }));
      expect((await store.getNode(a.uuid))?.name).toBe("contract-a");
      expect((await store.getNode("contract-a"))?.uuid).toBe(a.uuid);
      expect(await store.getNode(randomUUID())).toBeNull();
      await expect(store.createNode(node({ name: "contract-a" }))).rejects.toThrow(Duplicate);
      await store.updateNode(a.uuid, { instance_uuid: "i-1" });
      const b = await store.createNode(node());
      await expect(store.updateNode(b.uuid, { instance_uuid: "i-1" })).rejects.toThrow(Duplicate);
      await expect(store.updateNode(randomUUID(), {})).rejects.toThrow(NodeNotFound);
    });

    it("a create stores its first history entry with the node, or neither when it conflicts", async () => {
      const entry = (nodeUuid: string, event: string): NodeHistoryRecord => ({
        uuid: randomUUID(),
        node_uuid: nodeUuid,
        created_at: new Date().toISOString(),
        severity: "INFO",
        event,
        event_type: "create",
        conductor: "contract",
        user: "ops",
        project: null,
        remote_address: null,
        request_id: "req-1",
        changes: { name: "with-history" },
        state: "enroll",
        target_provision_state: null,
        duration_seconds: null,
      });
      // racing creates of one name (in one commit where the store groups writes): one node, one entry
      const racers = [node({ name: "with-history" }), node({ name: "with-history" })];
      const entries = racers.map((racer, i) => entry(racer.uuid, `racer ${i}`));
      const outcomes = await Promise.allSettled(
        racers.map((racer, i) => store.createNode(racer, entries[i])),
      );
      const won = outcomes.findIndex((o) => o.status === "fulfilled");
      const lost = 1 - won;
      expect(outcomes.filter((o) => o.status === "rejected")).toHaveLength(1);
      expect((outcomes[lost] as PromiseRejectedResult).reason).toBeInstanceOf(Duplicate);
      expect(await store.listNodeHistory(racers[won]!.uuid, {})).toEqual([entries[won]]);
      expect(await store.getNode(racers[lost]!.uuid)).toBeNull();
      expect(await store.listNodeHistory(racers[lost]!.uuid, {})).toEqual([]);
    });

    it("reservation is an atomic test-and-set: of 20 racing holders exactly one wins", async () => {
      const n = await store.createNode(node());
      const stores = [store, second ?? store];
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) => stores[i % 2]!.reserveNode(n.uuid, `holder-${i}`)),
      );
      const won = results.filter((r) => r.status === "fulfilled");
      expect(won).toHaveLength(1);
      for (const r of results) if (r.status === "rejected") expect(r.reason).toBeInstanceOf(NodeLocked);
      const holder = (await store.getNode(n.uuid))!.reservation!;
      expect(holder).toMatch(/^holder-/);
      await store.releaseNode(n.uuid, "someone-else");
      expect((await store.getNode(n.uuid))!.reservation).toBe(holder);
      await expect(store.updateNode(n.uuid, { description: "x" }, { ifReservedBy: null })).rejects.toThrow(
        NodeLocked,
      );
      await store.updateNode(n.uuid, { description: "mine" }, { ifReservedBy: holder });
      await store.releaseNode(n.uuid, holder);
      const after = (await store.getNode(n.uuid))!;
      expect(after.reservation).toBeNull();
      expect(after.description).toBe("mine");
      await expect(store.reserveNode(randomUUID(), "x")).rejects.toThrow(NodeNotFound);
    });

    it("releases every lock a holder left, and only those", async () => {
      const nodes = await Promise.all([1, 2, 3].map(() => store.createNode(node())));
      await store.reserveNode(nodes[0]!.uuid, "gone");
      await store.reserveNode(nodes[1]!.uuid, "gone");
      await store.reserveNode(nodes[2]!.uuid, "alive");
      expect((await store.releaseAllReservations("gone")).sort()).toEqual(
        [nodes[0]!.uuid, nodes[1]!.uuid].sort(),
      );
      expect((await store.getNode(nodes[0]!.uuid))!.reservation).toBeNull();
      expect((await store.getNode(nodes[2]!.uuid))!.reservation).toBe("alive");
      expect((await store.listNodes({ reservation: "alive" }, {})).map((n) => n.uuid)).toEqual([
        nodes[2]!.uuid,
      ]);
    });

    it("lists the nodes locked by the holders named, and no others", async () => {
      const tag = randomUUID().slice(0, 8);
      const [x, y, z] = await Promise.all([1, 2, 3].map(() => store.createNode(node())));
      await store.reserveNode(x!.uuid, `gone-${tag}/1`);
      await store.reserveNode(y!.uuid, `gone-${tag}/2`);
      await store.reserveNode(z!.uuid, `alive-${tag}/3`);
      const found = await store.listReservedBy([`gone-${tag}/1`, `gone-${tag}/2`, `never-${tag}/4`]);
      expect(found.map((n) => `${n.uuid} ${n.reservation} ${n.conductor_group}`).sort()).toEqual(
        [
          `${x!.uuid} gone-${tag}/1 ${x!.conductor_group}`,
          `${y!.uuid} gone-${tag}/2 ${y!.conductor_group}`,
        ].sort(),
      );
      expect(await store.listReservedBy([])).toEqual([]);
      expect(await store.listReservedBy([`never-${tag}/4`])).toEqual([]);
    });

    it("lists with filters, keyset pages and sort keys; summaries and counts agree", async () => {
      const group = `g-${randomUUID().slice(0, 8)}`;
      const names = ["p-c", "p-a", "p-e", "p-b", "p-d"];
      for (const n of names) await store.createNode(node({ name: n, conductor_group: group }));
      await store.createNode(node({ name: "p-m", conductor_group: group, maintenance: true }));
      const all = await store.listNodes({ conductor_group: group, maintenance: false }, {});
      expect(all.map((n) => n.name)).toEqual(names);
      const page1 = await store.listNodes({ conductor_group: group }, { limit: 2, sortKey: "name" });
      expect(page1.map((n) => n.name)).toEqual(["p-a", "p-b"]);
      const page2 = await store.listNodes(
        { conductor_group: group },
        { limit: 2, sortKey: "name", marker: page1[1]!.uuid },
      );
      expect(page2.map((n) => n.name)).toEqual(["p-c", "p-d"]);
      const desc = await store.listNodeSummaries(
        { conductor_group: group },
        { limit: 3, sortKey: "name", sortDir: "desc" },
      );
      expect(desc.map((n) => n.name)).toEqual(["p-m", "p-e", "p-d"]);
      expect(desc[0]!.maintenance).toBe(true);
      expect(desc[1]!.maintenance).toBe(false);
      const counts = await store.countNodesByState();
      expect(counts.enroll).toBeGreaterThanOrEqual(6);
      // only the columns asked for (and uuid) are read
      const narrow = await store.listNodeSummaries({ conductor_group: group }, { limit: 2 }, [
        "maintenance",
        "name",
      ]);
      expect(narrow.map((n) => Object.keys(n).sort())).toEqual([
        ["maintenance", "name", "uuid"],
        ["maintenance", "name", "uuid"],
      ]);
      expect(narrow.map((n) => [n.name, n.maintenance])).toEqual([
        ["p-c", false],
        ["p-a", false],
      ]);
    });

    it("a page's JSON built by the database equals the summaries it stands for (hostile names too)", async () => {
      const group = `j-${randomUUID().slice(0, 8)}`;
      const linkBase = 'http://h:1/"x\\';
      // the test names the fields itself rather than importing them: a change there must show here
      const fields = [
        "uuid",
        "instance_uuid",
        "maintenance",
        "power_state",
        "provision_state",
        "name",
      ] as const;
      const expected = (rows: Awaited<ReturnType<Store["listNodeSummaries"]>>) =>
        rows.map((n) => ({
          ...Object.fromEntries(fields.map((f) => [f, n[f]])),
          links: [
            { href: `${linkBase}/v1/nodes/${n.uuid}`, rel: "self" },
            { href: `${linkBase}/nodes/${n.uuid}`, rel: "bookmark" },
          ],
        }));
      let tried = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.record({
              name: fc.option(
                // printable ASCII or any code point, but never NUL, which PostgreSQL text cannot hold
                fc
                  .oneof(
                    fc.string({ minLength: 1, maxLength: 12 }),
                    fc.string({ unit: "binary", minLength: 1, maxLength: 12 }),
                  )
                  .map((t) => t.replaceAll("\0", "")),
                { nil: null },
              ),
              maintenance: fc.boolean(),
              associated: fc.boolean(),
            }),
            { maxLength: 6 },
          ),
          fc.record({
            sortKey: fc.constantFrom("id", "name", "provision_state", "maintenance"),
            sortDir: fc.constantFrom<"asc" | "desc">("asc", "desc"),
            limit: fc.integer({ min: 1, max: 4 }),
          }),
          async (specs, { sortKey, sortDir, limit }) => {
            tried++;
            const batch = `${group}-${tried}`;
            for (const [i, spec] of specs.entries()) {
              const made = await store.createNode(
                node({
                  // unique per run; still any bytes, quotes, backslashes and control characters
                  name: spec.name === null ? null : `${spec.name}"\\${batch}-${i}`,
                  conductor_group: batch,
                  maintenance: spec.maintenance,
                  instance_uuid: spec.associated ? randomUUID() : null,
                }),
              );
              // a later write must show too (what a store keeps per node follows the row)
              if (i % 2 === 1)
                await store.updateNode(made.uuid, {
                  maintenance: !spec.maintenance,
                  power_state: "power on",
                });
            }
            let marker: string | undefined;
            for (;;) {
              const page = { limit, sortKey, sortDir, marker };
              const rows = await store.listNodeSummaries({ conductor_group: batch }, page);
              const built = await store.listNodeSummaryJson({ conductor_group: batch }, page, linkBase);
              expect(JSON.parse(built.json.toString("utf8"))).toEqual(expected(rows));
              expect(built.count).toBe(rows.length);
              expect(built.lastUuid).toBe(rows.at(-1)?.uuid ?? null);
              if (rows.length < limit) break;
              marker = built.lastUuid!;
            }
          },
        ),
        { numRuns: 40 },
      );
      console.log(`summary JSON pages: ${tried} generated fleets compared`);
    });

    it("finds the nodes whose boot files a conductor outside the live set wrote, and follows later writes", async () => {
      const tag = randomUUID().slice(0, 8);
      const [dead, live, me] = [`dead-${tag}`, `live-${tag}`, `me-${tag}`];
      const make = (state: ProvisionState, info: Record<string, unknown>) =>
        store.createNode(node({ provision_state: state, driver_internal_info: info }));
      const orphanWait = await make("wait call-back", { ramdisk_prepared_by: dead });
      const orphanActive = await make("active", { instance_prepared_by: dead });
      await make("clean wait", { ramdisk_prepared_by: live });
      await make("inspect wait", { ramdisk_prepared_by: me });
      await make("active", { ramdisk_prepared_by: dead }); // active depends on the instance's files only
      await make("deploying", { ramdisk_prepared_by: dead }); // not a state adoption looks at
      await make("wait call-back", {});
      const moved = await make("wait call-back", { ramdisk_prepared_by: live });
      const waitStates = ["wait call-back", "clean wait", "inspect wait"];
      const find = async (liveSet: string[]) =>
        (await store.listOrphanedBoots({ waitStates, live: liveSet }))
          .map((n) => n.uuid)
          .filter((uuid) => [orphanWait.uuid, orphanActive.uuid, moved.uuid].includes(uuid))
          .sort();
      expect(await find([live, me])).toEqual([orphanWait.uuid, orphanActive.uuid].sort());
      // a later write of the preparer is what the query sees
      await store.updateNode(moved.uuid, { driver_internal_info: { ramdisk_prepared_by: dead } });
      await store.updateNode(orphanActive.uuid, { driver_internal_info: { instance_prepared_by: me } });
      expect(await find([live, me])).toEqual([orphanWait.uuid, moved.uuid].sort());
      // everyone alive: nothing is orphaned
      expect(await find([live, me, dead])).toEqual([]);
      // whole documents come back
      const whole = (await store.listOrphanedBoots({ waitStates, live: [live, me] })).find(
        (n) => n.uuid === orphanWait.uuid,
      );
      expect(whole?.driver_internal_info).toEqual({ ramdisk_prepared_by: dead });
    });

    it("a shared secret is created once: racing first writers all read the winner's value", async () => {
      const name = `secret-${randomUUID()}`;
      const candidates = Array.from({ length: 8 }, (_, i) => `candidate-${i}`);
      const stores = [store, second ?? store];
      const got = await Promise.all(candidates.map((c, i) => stores[i % 2]!.sharedSecret(name, c)));
      expect(candidates).toContain(got[0]);
      expect(new Set(got).size).toBe(1);
      // a later conductor with its own candidate still reads the stored one
      expect(await store.sharedSecret(name, "late")).toBe(got[0]);
    });

    it("ports: unique MACs, a known node, cascade with the node", async () => {
      const n = await store.createNode(node());
      const p = await store.createPort(port(n.uuid, "52:54:00:aa:00:01"));
      await expect(store.createPort(port(n.uuid, "52:54:00:aa:00:01"))).rejects.toThrow(Duplicate);
      await expect(store.createPort(port(randomUUID(), "52:54:00:aa:00:02"))).rejects.toThrow(NodeNotFound);
      expect((await store.updatePort(p.uuid, { pxe_enabled: false })).pxe_enabled).toBe(false);
      expect((await store.listPorts({ node_uuid: n.uuid }, {})).map((x) => x.uuid)).toEqual([p.uuid]);
      expect((await store.listPorts({ address: "52:54:00:aa:00:01" }, {}))[0]?.pxe_enabled).toBe(false);
      await store.saveInventory(n.uuid, { cpu: { count: 4 } });
      expect(await store.getInventory(n.uuid)).toEqual({ cpu: { count: 4 } });
      await store.setAgentToken(n.uuid, { digest: "d1", bootId: "b1" });
      await store.setAgentToken(n.uuid, { digest: "d2", bootId: "b2" });
      expect(await store.getAgentToken(n.uuid)).toEqual({ digest: "d2", bootId: "b2" });
      await store.deleteNode(n.uuid);
      expect(await store.getPort(p.uuid)).toBeNull();
      expect(await store.getAgentToken(n.uuid)).toBeNull();
      await expect(store.deletePort(p.uuid)).rejects.toThrow(NotFound);
      await expect(store.deleteNode(n.uuid)).rejects.toThrow(NodeNotFound);
    });

    it("allocations: unique names, updates, filters", async () => {
      const a = await store.createAllocation({ ...allocation(), name: "alloc-x", resource_class: "rc-x" });
      await expect(store.createAllocation({ ...allocation(), name: "alloc-x" })).rejects.toThrow(Duplicate);
      expect((await store.getAllocation("alloc-x"))?.uuid).toBe(a.uuid);
      const updated = await store.updateAllocation(a.uuid, { state: "error", last_error: "none" });
      expect(updated).toEqual({ ...a, state: "error", last_error: "none", updated_at: updated.updated_at });
      expect(updated.updated_at).not.toBeNull();
      expect(await store.getAllocation(a.uuid)).toEqual(updated);
      expect((await store.listAllocations({ resource_class: "rc-x" }, {}))[0]?.state).toBe("error");
      // the indexed columns follow the document: filters and the unique name see the change
      const other = await store.createAllocation({ ...allocation(), name: "alloc-y" });
      await store.updateAllocation(other.uuid, { state: "active", node_uuid: "n-1", resource_class: "rc-y" });
      expect(
        (await store.listAllocations({ node_uuid: "n-1", state: "active" }, {})).map((x) => x.uuid),
      ).toEqual([other.uuid]);
      expect((await store.listAllocations({ resource_class: "rc-y" }, {})).map((x) => x.uuid)).toEqual([
        other.uuid,
      ]);
      await expect(store.updateAllocation(other.uuid, { name: "alloc-x" })).rejects.toThrow(Duplicate);
      await store.updateAllocation(other.uuid, { name: "alloc-z" });
      expect((await store.getAllocation("alloc-z"))?.uuid).toBe(other.uuid);
      expect(await store.getAllocation("alloc-y")).toBeNull();
      await expect(store.updateAllocation(randomUUID(), { state: "error" })).rejects.toThrow(NotFound);
      await store.deleteAllocation(other.uuid);
      await store.deleteAllocation(a.uuid);
      await expect(store.deleteAllocation(a.uuid)).rejects.toThrow(NotFound);
    });

    it("40 racing claims (two connections) for 20 free nodes: exactly 20 win, no node twice", async () => {
      const rc = `race-${randomUUID().slice(0, 8)}`;
      const free = await Promise.all(
        Array.from({ length: 20 }, () => store.createNode(freeNode({ resource_class: rc }))),
      );
      await store.createNode(freeNode({ resource_class: rc, maintenance: true }));
      await store.createNode(freeNode({ resource_class: rc, reservation: "busy" }));
      await store.createNode(freeNode({ resource_class: rc, power_state: null }));
      await store.createNode(
        node({ resource_class: rc, provision_state: "manageable", power_state: "power off" }),
      );
      const stores = [store, second ?? store];
      const claims = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          stores[i % 2]!.claimNode(`alloc-${i}`, request({ resourceClass: rc })),
        ),
      );
      const won = claims.filter((c): c is NodeRecord => c !== null);
      expect(won).toHaveLength(20);
      expect(new Set(won.map((n) => n.uuid))).toEqual(new Set(free.map((n) => n.uuid)));
      for (const n of won) {
        const stored = (await store.getNode(n.uuid))!;
        expect(stored.instance_uuid).toBe(n.instance_uuid);
        expect(stored.allocation_uuid).toBe(stored.instance_uuid);
        // the claim's answer is the stored node, nothing else changed (PostgreSQL updates it in place)
        expect(stored).toEqual(n);
        expect(stored.updated_at).not.toBeNull();
      }
      expect(await store.claimNode("late", request({ resourceClass: rc }))).toBeNull();
    });

    it("claims match traits, candidate nodes and the spec (best fit and exact) in SQL", async () => {
      const rc = `fit-${randomUUID().slice(0, 8)}`;
      const make = (name: string, props: Record<string, unknown>, traits: string[] = []) =>
        store.createNode(freeNode({ name: `${rc}-${name}`, resource_class: rc, properties: props, traits }));
      const big = await make("big", { memory_mb: 131072, cpus: 64, local_gb: 2000, cpu_arch: "x86_64" }, [
        "CUSTOM_GPU",
        "CUSTOM_FAST",
      ]);
      const mid = await make("mid", {
        memory_mb: 32768,
        cpus: "16",
        local_gb: 500,
        cpu_arch: "x86_64",
        capabilities: "boot_mode:uefi,disk_label:gpt",
      });
      const small = await make("small", { memory_mb: 16384, cpus: 8, local_gb: 100, cpu_arch: "aarch64" });
      const claim = (fields: Partial<Parameters<Store["claimNode"]>[1]>) =>
        store.claimNode(randomUUID(), request({ resourceClass: rc, ...fields }));
      const release = (n: NodeRecord | null) =>
        n && store.updateNode(n.uuid, { instance_uuid: null, allocation_uuid: null });

      const gpu = await claim({ traits: ["CUSTOM_GPU", "CUSTOM_FAST"] });
      expect(gpu?.uuid).toBe(big.uuid);
      // only the association and updated_at change; traits and the rest are kept as they were
      expect(gpu).toEqual({
        ...big,
        instance_uuid: gpu?.instance_uuid,
        allocation_uuid: gpu?.instance_uuid,
        updated_at: gpu?.updated_at,
      });
      expect(await store.getNode(big.uuid)).toEqual(gpu);
      expect(await claim({ traits: ["CUSTOM_GPU"] })).toBeNull();
      await release(gpu);

      const fit = await claim({ spec: { memory_mb: 20000, match: "best_fit" } });
      expect(fit?.uuid).toBe(mid.uuid);
      await release(fit);
      const exact = await claim({ spec: { memory_mb: 16384, vcpus: 8, match: "exact" } });
      expect(exact?.uuid).toBe(small.uuid);
      await release(exact);
      expect(await claim({ spec: { memory_mb: 16000, match: "exact" } })).toBeNull();
      const arch = await claim({ spec: { cpu_arch: "aarch64", match: "best_fit" } });
      expect(arch?.uuid).toBe(small.uuid);
      await release(arch);
      const caps = await claim({ spec: { capabilities: { boot_mode: "uefi" }, match: "best_fit" } });
      expect(caps?.uuid).toBe(mid.uuid);
      await release(caps);
      // a LIKE wildcard in the request matches nothing it should not
      expect(await claim({ spec: { capabilities: { boot_mode: "%" }, match: "best_fit" } })).toBeNull();
      const named = await claim({ candidateNodes: [`${rc}-small`, big.uuid] });
      expect([small.uuid, big.uuid]).toContain(named?.uuid);
    });

    it("claims by traits: every requested trait, extra ones allowed; trait, state and class changes followed", async () => {
      const rc = `traits-${randomUUID().slice(0, 8)}`;
      const tag = randomUUID().slice(0, 8).toUpperCase();
      const [A, B, C, Z] = ["A", "B", "C", "Z"].map((t) => `CUSTOM_${t}_${tag}`) as [
        string,
        string,
        string,
        string,
      ];
      const make = (traits: string[], fields: Partial<NodeRecord> = {}) =>
        store.createNode(freeNode({ resource_class: rc, traits, ...fields }));
      const claim = (traits: string[], resourceClass: string | null = rc) =>
        store.claimNode(randomUUID(), request({ resourceClass, traits }));
      const release = (n: NodeRecord) =>
        store.updateNode(n.uuid, { instance_uuid: null, allocation_uuid: null });

      const onlyA = await make([A]);
      const both = await make([A, B]);
      const extra = await make([C, B, A]);
      const none = await make([]);
      await make([B]);
      // several traits: only nodes carrying all of them, an extra trait does not matter; each node once
      const first = await claim([A, B]);
      const second = await claim([B, A, A]);
      expect(new Set([first?.uuid, second?.uuid])).toEqual(new Set([both.uuid, extra.uuid]));
      expect(await claim([A, B])).toBeNull();
      const a = await claim([A]);
      expect(a?.uuid).toBe(onlyA.uuid);
      expect(await claim([A])).toBeNull();
      for (const n of [first!, second!, a!]) await release(n);

      // a trait removed from a node is no longer matched; one added is
      await store.updateNode(extra.uuid, { traits: [A, C] });
      expect((await claim([A, B]))?.uuid).toBe(both.uuid);
      expect(await claim([A, B])).toBeNull();
      await store.updateNode(none.uuid, { traits: [B, A] });
      expect((await claim([A, B]))?.uuid).toBe(none.uuid);
      expect((await claim([C]))?.uuid).toBe(extra.uuid);

      // a node that becomes free is matched; one in maintenance, reserved, or of another class is not
      const later = await make([Z], { provision_state: "manageable" });
      expect(await claim([Z])).toBeNull();
      await store.updateNode(later.uuid, { provision_state: "available" });
      const z = (await claim([Z]))!;
      expect(z.uuid).toBe(later.uuid);
      await release(z);
      await store.updateNode(later.uuid, { maintenance: true });
      expect(await claim([Z])).toBeNull();
      await store.updateNode(later.uuid, { maintenance: false });
      await store.reserveNode(later.uuid, "busy");
      expect(await claim([Z])).toBeNull();
      // its traits rewritten while it is reserved: once released it is matched again
      await store.updateNode(later.uuid, { traits: [Z, C] });
      await store.releaseNode(later.uuid, "busy");
      await release((await claim([Z]))!);
      await store.updateNode(later.uuid, { resource_class: `${rc}-other` });
      expect(await claim([Z])).toBeNull();
      // without a class any class will do
      const anyClass = (await claim([Z], null))!;
      expect(anyClass.uuid).toBe(later.uuid);
      expect(await store.getNode(later.uuid)).toEqual(anyClass);
      // a free node with the trait behind many reserved ones is still found
      const held = [];
      for (let i = 0; i < 40; i++) held.push(await make([A, tag]));
      for (const n of held) await store.reserveNode(n.uuid, "busy");
      const behind = await make([A, tag]);
      expect((await claim([tag, A]))?.uuid).toBe(behind.uuid);
      expect(await claim([tag])).toBeNull();
      // a deleted node's traits go with it
      await store.deleteNode(onlyA.uuid);
      expect(await claim([A], null)).toBeNull();
    });

    it("property: claims by traits (and a spec) take exactly the nodes a model picks, in its order, after any writes", async () => {
      const TRAITS = ["CUSTOM_A", "CUSTOM_B", "CUSTOM_C", "HW_CPU_X86_AVX2"];
      const traitSet = fc.uniqueArray(fc.constantFrom(...TRAITS), { maxLength: 4 });
      const size = fc.record({
        memory_mb: fc.constantFrom(8192, 16384, 32768),
        cpus: fc.constantFrom(4, 8),
        local_gb: fc.constantFrom(100, 500),
      });
      const change = fc.oneof(
        fc.record({ kind: fc.constant("traits" as const), traits: traitSet }),
        fc.record({ kind: fc.constant("state" as const), state: fc.constantFrom("available", "manageable") }),
        fc.record({ kind: fc.constant("maintenance" as const), on: fc.boolean() }),
        fc.record({ kind: fc.constant("power" as const), known: fc.boolean() }),
        fc.record({ kind: fc.constant("class" as const), own: fc.boolean() }),
        fc.record({ kind: fc.constant("size" as const), size }),
        fc.record({ kind: fc.constant("reserve" as const), on: fc.boolean() }),
        // claimed by name and given back: the node's row changes twice without its traits being rewritten
        fc.record({ kind: fc.constant("claim-release" as const) }),
      );
      const fleet = fc.array(
        fc.record({ traits: traitSet, size, changes: fc.array(change, { maxLength: 3 }) }),
        { minLength: 2, maxLength: 12 },
      );
      // mostly one or two traits, so that some nodes match; sometimes a repeated trait (hostile but allowed) or
      // one no node has
      const wanted = fc.oneof(
        { weight: 3, arbitrary: fc.uniqueArray(fc.constantFrom(...TRAITS), { minLength: 1, maxLength: 2 }) },
        {
          weight: 1,
          arbitrary: fc.array(fc.constantFrom(...TRAITS, "CUSTOM_NOBODY"), { minLength: 1, maxLength: 4 }),
        },
      );
      const spec = fc.option(
        fc.record(
          {
            memory_mb: fc.constantFrom(8192, 16384, 32768),
            vcpus: fc.constantFrom(4, 8),
            local_gb: fc.constantFrom(100, 500),
            match: fc.constantFrom("exact" as const, "best_fit" as const),
          },
          { requiredKeys: ["match"] },
        ),
        { freq: 2 }, // half the requests without a spec
      );
      let fleets = 0;
      let claims = 0;
      let taken = 0;
      await fc.assert(
        fc.asyncProperty(fleet, wanted, spec, async (specs, traits, want) => {
          fleets += 1;
          const rc = `prop-${randomUUID().slice(0, 8)}`;
          const nodes: NodeRecord[] = [];
          for (const spec of specs) {
            let n = await store.createNode(
              freeNode({ resource_class: rc, traits: spec.traits, properties: spec.size }),
            );
            for (const c of spec.changes) {
              if (c.kind === "traits") n = await store.updateNode(n.uuid, { traits: c.traits });
              if (c.kind === "state") n = await store.updateNode(n.uuid, { provision_state: c.state });
              if (c.kind === "maintenance") n = await store.updateNode(n.uuid, { maintenance: c.on });
              if (c.kind === "power")
                n = await store.updateNode(n.uuid, { power_state: c.known ? "power on" : null });
              if (c.kind === "class")
                n = await store.updateNode(n.uuid, { resource_class: c.own ? rc : `${rc}-x` });
              if (c.kind === "size") n = await store.updateNode(n.uuid, { properties: c.size });
              if (c.kind === "reserve" && c.on && n.reservation === null)
                n = await store.reserveNode(n.uuid, "p");
              if (c.kind === "reserve" && !c.on && n.reservation !== null) {
                await store.releaseNode(n.uuid, "p");
                n = (await store.getNode(n.uuid))!;
              }
              if (
                c.kind === "claim-release" &&
                (await store.claimNode(randomUUID(), request({ candidateNodes: [n.uuid] })))
              ) {
                n = await store.updateNode(n.uuid, { instance_uuid: null, allocation_uuid: null });
              }
            }
            nodes.push(n);
          }
          const sizeOf = (n: NodeRecord) => [
            n.properties.memory_mb,
            n.properties.cpus,
            n.properties.local_gb,
          ];
          const fits = (n: NodeRecord) => {
            if (!want) return true;
            const [memory, cpus, disk] = sizeOf(n) as number[];
            const pairs: [number, number | undefined][] = [
              [memory!, want.memory_mb],
              [cpus!, want.vcpus],
              [disk!, want.local_gb],
            ];
            return pairs.every(([has, asked]) =>
              asked === undefined ? true : want.match === "exact" ? has === asked : has >= asked,
            );
          };
          // creation order is id order; best fit sorts by memory, CPUs, disk, then id
          const model = nodes
            .map((n, i) => ({ n, key: [...(want ? (sizeOf(n) as number[]) : []), i] }))
            .filter(
              ({ n }) =>
                n.resource_class === rc &&
                n.provision_state === "available" &&
                n.instance_uuid === null &&
                n.reservation === null &&
                n.power_state !== null &&
                !n.maintenance &&
                traits.every((t) => n.traits.includes(t)) &&
                fits(n),
            )
            .sort((a, b) => {
              const at = a.key.findIndex((v, i) => v !== b.key[i]);
              return at < 0 ? 0 : a.key[at]! - b.key[at]!;
            });
          const got: string[] = [];
          for (;;) {
            claims += 1;
            const node = await store.claimNode(
              randomUUID(),
              request({ resourceClass: rc, traits, spec: want }),
            );
            if (!node) break;
            got.push(node.uuid);
          }
          taken += got.length;
          expect(got).toEqual(model.map(({ n }) => n.uuid));
        }),
        { numRuns: 150 },
      );
      console.log(
        `trait claims property (${name}): ${fleets} fleets, ${claims} claims, ${taken} nodes taken`,
      );
    });

    it("racing claims by trait (two connections): every node with it once, none without it", async () => {
      const rc = `trait-race-${randomUUID().slice(0, 8)}`;
      const trait = `CUSTOM_RACE_${randomUUID().slice(0, 8).toUpperCase()}`;
      const fast = [];
      for (let i = 0; i < 30; i++) {
        const n = await store.createNode(freeNode({ resource_class: rc, traits: i % 3 ? [] : [trait] }));
        if (i % 3 === 0) fast.push(n);
      }
      const stores = [store, second ?? store];
      const claims = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          stores[i % 2]!.claimNode(randomUUID(), request({ resourceClass: rc, traits: [trait] })),
        ),
      );
      const won = claims.filter((c): c is NodeRecord => c !== null);
      expect(won).toHaveLength(10);
      expect(new Set(won.map((n) => n.uuid))).toEqual(new Set(fast.map((n) => n.uuid)));
    });

    it("conductors: one online row per hostname; stale or retired predecessors make way; heartbeats", async () => {
      const first = conductor("c-1");
      await store.registerConductor(first, { staleBefore: 0, retire: [] });
      // a second process under the same name while the first is alive: refused
      await expect(
        (second ?? store).registerConductor(conductor("c-1"), { staleBefore: 0, retire: [] }),
      ).rejects.toThrow(ConductorAlreadyRegistered);
      expect(await store.touchConductor(first.identity, 2_000_000, "http://127.0.0.1:1")).toBe(true);
      // once its heartbeat is stale, a newcomer under that name registers and the old row goes offline
      const next = conductor("c-1", { heartbeat_at: 3_000_000 });
      await store.registerConductor(next, { staleBefore: 2_500_000, retire: [] });
      const rows = (await store.listConductors()).filter((r) => r.hostname === "c-1");
      expect(rows.map((r) => [r.identity, r.online])).toEqual([
        [first.identity, false],
        [next.identity, true],
      ]);
      expect(rows[0]!.url).toBe("http://127.0.0.1:1");
      expect(rows[0]!.heartbeat_at).toBe(2_000_000);
      expect(rows[1]!.drivers).toEqual(["fake-hardware"]);
      expect(await store.touchConductor(first.identity, 4_000_000)).toBe(false);
      // a crashed predecessor named in `retire` makes way at once, fresh heartbeat or not
      const third = conductor("c-1", { heartbeat_at: 5_000_000 });
      await store.registerConductor(third, { staleBefore: 0, retire: [next.identity] });
      await store.retireConductor(third.identity);
      expect((await store.listConductors()).filter((r) => r.online && r.hostname === "c-1")).toEqual([]);
    });

    it("conductors: the named dead registrations without locks are pruned; each name keeps its latest, lock holders stay", async () => {
      const tag = randomUUID().slice(0, 8);
      const [a, b, c] = [`prune-a-${tag}`, `prune-b-${tag}`, `prune-c-${tag}`];
      const register = async (hostname: string) => {
        const row = conductor(hostname);
        await store.registerConductor(row, { staleBefore: 0, retire: [] });
        return row;
      };
      const retired = await register(a);
      await store.retireConductor(retired.identity); // a clean stop
      const crashed = await register(a);
      await store.retireConductor(crashed.identity); // found dead
      const holder = await register(a); // died holding a lock
      const locked = await store.createNode(node());
      await store.reserveNode(locked.uuid, holder.identity);
      await store.retireConductor(holder.identity);
      const latest = await register(a);
      const onlyOne = await register(b); // dead, but its name's latest row
      const unnamed = await register(c); // an older row nobody called dead
      await store.retireConductor(unnamed.identity);
      const newer = await register(c);
      const dead = [retired, crashed, holder, onlyOne].map((r) => r.identity);

      expect((await store.pruneConductors(dead)).sort()).toEqual([retired.identity, crashed.identity].sort());
      const left = (await store.listConductors())
        .filter((r) => r.hostname.includes(tag))
        .map((r) => r.identity);
      expect(left.sort()).toEqual(
        [holder.identity, latest.identity, onlyOne.identity, unnamed.identity, newer.identity].sort(),
      );
      // once its lock is released, the holder goes too
      await store.releaseNode(locked.uuid, holder.identity);
      expect(await store.pruneConductors(dead)).toEqual([holder.identity]);
      expect(await store.pruneConductors(dead)).toEqual([]);
      expect(await store.pruneConductors([])).toEqual([]);
    });

    it("keeps tokens by digest for every connection: issued, found, listed while live, revoked, capped", async () => {
      const now = "2030-01-01T00:00:00.000Z";
      const token = (user: string, expires: string) => ({
        id: randomUUID(),
        digest: randomUUID().replace(/-/g, ""),
        user,
        fingerprint: "f".repeat(64),
        created_at: now,
        expires_at: expires,
        revoked: false,
      });
      const live = token("contract-alice", "2030-01-01T01:00:00.000Z");
      const dead = token("contract-alice", "2029-12-31T23:00:00.000Z");
      expect(await store.insertToken(dead, { now: "2029-01-01T00:00:00.000Z", maxPerUser: 5 })).toBe(true);
      expect(await store.insertToken(live, { now, maxPerUser: 2 })).toBe(true);
      const other = second ?? store;
      expect(await other.tokenByDigest(live.digest)).toEqual(live);
      // the expired one was purged by the second insert
      expect(await other.tokenById(dead.id)).toBeNull();
      expect((await other.listTokens(now)).map((t) => t.id)).toContain(live.id);
      expect(await store.insertToken(token("contract-alice", live.expires_at), { now, maxPerUser: 1 })).toBe(
        false,
      );
      expect(await other.revokeToken(live.id)).toBe(true);
      expect(await store.revokeToken(live.id)).toBe(false);
      expect((await store.tokenByDigest(live.digest))?.revoked).toBe(true);
      expect((await store.listTokens(now)).map((t) => t.id)).not.toContain(live.id);
    });
  });
}
