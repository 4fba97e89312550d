import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newNode } from "../../conductor/operations/node-record.ts";
import { api, startConductor } from "../helpers/conductor.ts";
import { startPostgres, type ThrowawayPostgres } from "../helpers/postgres.ts";

let pg: ThrowawayPostgres;
const conductors: Awaited<ReturnType<typeof startConductor>>[] = [];

beforeAll(async () => {
  pg = await startPostgres();
  const database = await pg.freshDatabase("allocations");
  for (let i = 0; i < 3; i++)
    conductors.push(await startConductor({ name: `alloc-${i}`, databasePath: database }));
});
afterAll(async () => {
  for (const c of conductors) await c.stop();
  await pg?.stop();
});

describe("allocations raced across three conductors on one PostgreSQL", () => {
  it("200 requests for 100 matching nodes: exactly 100 active, no node twice", async () => {
    const { store, drivers } = conductors[0]!.conductor;
    const fake = drivers.get("fake-hardware")!;
    const matching = new Set<string>();
    for (let i = 0; i < 120; i++) {
      const node = await store.createNode({
        ...newNode({ driver: "fake-hardware" }, fake),
        provision_state: "available",
        power_state: "power off",
        resource_class: i < 100 ? "race" : "other",
      });
      if (i < 100) matching.add(node.uuid);
    }
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        api(`${conductors[i % 3]!.url}/v1/allocations`, { method: "POST", body: { resource_class: "race" } }),
      ),
    );
    expect(results.every((r) => r.status === 201)).toBe(true);
    const bodies = results.map((r) => r.body as { uuid: string; state: string; node_uuid: string | null });
    const won = bodies.filter((b) => b.state === "active");
    expect(won).toHaveLength(100);
    expect(bodies.filter((b) => b.state === "error")).toHaveLength(100);
    expect(new Set(won.map((b) => b.node_uuid))).toEqual(matching);
    for (const allocation of won.slice(0, 20)) {
      const node = (await store.getNode(allocation.node_uuid!))!;
      expect(node.allocation_uuid).toBe(allocation.uuid);
      expect(node.instance_uuid).toBe(allocation.uuid);
    }
    console.log(
      `cluster allocations: ${won.length} active, ${bodies.length - won.length} error, across ${conductors.length} conductors`,
    );
  });
});
