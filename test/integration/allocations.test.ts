import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createConductor } from "../../conductor/server.ts";
import { silentLogger } from "../../shared/log.ts";
import { api, powerOff, provisionThrough, startConductor } from "../helpers/conductor.ts";
import { until } from "../helpers/wait.ts";

let first: Awaited<ReturnType<typeof startConductor>>;
let second: { url: string; stop(): Promise<void> };

async function availableNode(url: string, body: Record<string, unknown>): Promise<string> {
  const created = await api(`${url}/v1/nodes`, {
    method: "POST",
    body: { driver: "fake-hardware", ...body },
  });
  expect(created.status).toBe(201);
  const uuid = String((created.body as { uuid: string }).uuid);
  await provisionThrough(url, uuid, [
    ["manage", "manageable"],
    ["provide", "available"],
  ]);
  await powerOff(url, uuid);
  return uuid;
}

beforeAll(async () => {
  first = await startConductor();
  // a second conductor process-alike on the same SQLite file: claims must be atomic across connections
  const other = createConductor({ ...first.config, port: 0, name: "conductor-2" }, { logger: silentLogger });
  const url = await other.start();
  second = { url, stop: () => other.stop() };
});
afterAll(async () => {
  await second.stop();
  await first.stop();
});

describe("allocations", () => {
  it("20 concurrent requests for 10 matching nodes: exactly 10 win, no node twice", async () => {
    const nodes = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        availableNode(first.url, { name: `race-${i}`, resource_class: "race" }),
      ),
    );
    await availableNode(first.url, { name: "other-class", resource_class: "not-race" });
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        api(`${i % 2 ? first.url : second.url}/v1/allocations`, {
          method: "POST",
          body: { resource_class: "race" },
        }),
      ),
    );
    expect(results.every((r) => r.status === 201)).toBe(true);
    const allocations = results.map(
      (r) => r.body as { state: string; node_uuid: string | null; last_error: string | null },
    );
    const won = allocations.filter((a) => a.state === "active");
    const lost = allocations.filter((a) => a.state === "error");
    expect(won).toHaveLength(10);
    expect(lost).toHaveLength(10);
    expect(new Set(won.map((a) => a.node_uuid))).toEqual(new Set(nodes));
    for (const loser of lost)
      expect(loser.last_error).toMatch(/no available nodes match the resource class race/);
    for (const uuid of nodes) {
      const node = (await api(`${first.url}/v1/nodes/${uuid}`)).body as {
        instance_uuid: string;
        allocation_uuid: string;
      };
      expect(won.filter((a) => a.node_uuid === uuid)).toHaveLength(1);
      expect(node.instance_uuid).toBe(node.allocation_uuid);
    }
  });

  it("best_fit takes the smallest node that satisfies the spec", async () => {
    const big = await availableNode(first.url, {
      name: "big",
      resource_class: "fit",
      properties: { memory_mb: 131072, cpus: 64, local_gb: 2000 },
    });
    const mid = await availableNode(first.url, {
      name: "mid",
      resource_class: "fit",
      properties: { memory_mb: 32768, cpus: 16, local_gb: 500 },
    });
    const small = await availableNode(first.url, {
      name: "small",
      resource_class: "fit",
      properties: { memory_mb: 8192, cpus: 4, local_gb: 100 },
    });
    const request = { resource_class: "fit", spec: { memory_mb: 16384, vcpus: 8, match: "best_fit" } };
    const firstPick = (await api(`${first.url}/v1/allocations`, { method: "POST", body: request })).body as {
      node_uuid: string;
    };
    expect(firstPick.node_uuid).toBe(mid);
    const secondPick = (await api(`${first.url}/v1/allocations`, { method: "POST", body: request })).body as {
      node_uuid: string;
    };
    expect(secondPick.node_uuid).toBe(big);
    const none = (await api(`${first.url}/v1/allocations`, { method: "POST", body: request })).body as {
      state: string;
    };
    expect(none.state).toBe("error");
    const exact = (
      await api(`${first.url}/v1/allocations`, {
        method: "POST",
        body: { resource_class: "fit", spec: { memory_mb: 8192, vcpus: 4, local_gb: 100, match: "exact" } },
      })
    ).body as { node_uuid: string };
    expect(exact.node_uuid).toBe(small);
  });

  it("filters by traits and candidate nodes", async () => {
    const plain = await availableNode(first.url, { name: "plain", resource_class: "traits" });
    const fast = await availableNode(first.url, { name: "fast", resource_class: "traits" });
    expect((await api(`${first.url}/v1/nodes/${fast}/traits/CUSTOM_FAST`, { method: "PUT" })).status).toBe(
      204,
    );
    const byTrait = (
      await api(`${first.url}/v1/allocations`, {
        method: "POST",
        body: { resource_class: "traits", traits: ["CUSTOM_FAST"] },
      })
    ).body as { node_uuid: string };
    expect(byTrait.node_uuid).toBe(fast);
    const byCandidate = (
      await api(`${first.url}/v1/allocations`, {
        method: "POST",
        body: { resource_class: "traits", candidate_nodes: ["plain"] },
      })
    ).body as { node_uuid: string };
    expect(byCandidate.node_uuid).toBe(plain);
  });

  it("refuses to delete an allocated node, frees it when the allocation goes", async () => {
    const uuid = await availableNode(first.url, { name: "held", resource_class: "held" });
    const allocation = (
      await api(`${first.url}/v1/allocations`, {
        method: "POST",
        body: { resource_class: "held", name: "hold-1" },
      })
    ).body as { uuid: string };
    const refused = await api(`${first.url}/v1/nodes/held`, { method: "DELETE" });
    expect(refused.status).toBe(409);
    expect(JSON.stringify(refused.body)).toContain(`is associated with instance ${allocation.uuid}`);
    expect((await api(`${first.url}/v1/allocations/hold-1`, { method: "DELETE" })).status).toBe(204);
    expect(
      ((await api(`${first.url}/v1/nodes/${uuid}`)).body as { instance_uuid: unknown }).instance_uuid,
    ).toBeNull();
    expect((await api(`${first.url}/v1/nodes/held`, { method: "DELETE" })).status).toBe(204);
  });

  it("a node locked by an action in progress is waited for (allocating), not reported missing", async () => {
    const uuid = await availableNode(first.url, { name: "busy-1", resource_class: "busy" });
    // the lock a power change takes just after `provide` (openstacksdk's suite powers off, then allocates)
    await first.conductor.store.reserveNode(uuid, "power-change");
    const created = await api(`${first.url}/v1/allocations`, {
      method: "POST",
      body: { resource_class: "busy" },
    });
    expect(created.status).toBe(201);
    const allocation = created.body as { uuid: string; state: string; node_uuid: string | null };
    expect(allocation).toMatchObject({ state: "allocating", node_uuid: null });
    await first.conductor.store.releaseNode(uuid, "power-change");
    const settled = await until(
      async () => {
        const shown = await api(`${first.url}/v1/allocations/${allocation.uuid}`);
        const body = shown.body as { state: string; node_uuid: string | null };
        return body.state === "allocating" ? undefined : body;
      },
      { what: "the allocation to settle" },
    );
    expect(settled).toMatchObject({ state: "active", node_uuid: uuid });
    // by candidate: a named node that is locked is waited for too
    const named = await availableNode(first.url, { name: "busy-2", resource_class: "busy" });
    await first.conductor.store.reserveNode(named, "power-change");
    const byName = await api(`${first.url}/v1/allocations`, {
      method: "POST",
      body: { candidate_nodes: ["busy-2"], resource_class: "busy" },
    });
    const waiting = byName.body as { uuid: string; state: string };
    expect(waiting.state).toBe("allocating");
    await first.conductor.store.releaseNode(named, "power-change");
    const claimed = await until(
      async () => {
        const body = (await api(`${first.url}/v1/allocations/${waiting.uuid}`)).body as {
          state: string;
          node_uuid: string | null;
        };
        return body.state === "allocating" ? undefined : body;
      },
      { what: "the candidate allocation to settle" },
    );
    expect(claimed).toMatchObject({ state: "active", node_uuid: named });
    // no matching node at all: still told at once
    const none = await api(`${first.url}/v1/allocations`, {
      method: "POST",
      body: { resource_class: "no-such-class" },
    });
    expect((none.body as { state: string }).state).toBe("error");
  });
});
