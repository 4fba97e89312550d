import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConductorAlreadyRegistered } from "../../conductor/db/store.ts";
import { createConductor } from "../../conductor/server.ts";
import { silentLogger } from "../../shared/log.ts";
import { api, faultOf, startConductor, waitForState } from "../helpers/conductor.ts";

type ConductorView = { hostname: string; alive: boolean; owned_nodes: number; conductor_group: string };

let a: Awaited<ReturnType<typeof startConductor>>;
let b: { url: string; stop(): Promise<void> };

beforeAll(async () => {
  a = await startConductor({ name: "cond-a", fakeDelayMs: 1500, cluster: { heartbeatIntervalS: 1 } });
  const other = createConductor({ ...a.config, port: 0, name: "cond-b" }, { logger: silentLogger });
  b = { url: await other.start(), stop: () => other.stop() };
});
afterAll(async () => {
  await a.stop();
});

async function conductors(url: string): Promise<ConductorView[]> {
  return ((await api(`${url}/v1/conductors`)).body as { conductors: ConductorView[] }).conductors;
}

describe("conductor membership on one database", () => {
  it("both conductors list both, alive, and the ring splits the nodes between them", async () => {
    const uuids: string[] = [];
    for (let i = 0; i < 24; i++) {
      const created = await api(`${a.url}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware" } });
      uuids.push((created.body as { uuid: string }).uuid);
    }
    for (const url of [a.url, b.url]) {
      const list = await conductors(url);
      expect(list.map((c) => [c.hostname, c.alive]).sort()).toEqual([
        ["cond-a", true],
        ["cond-b", true],
      ]);
      expect(list.reduce((sum, c) => sum + c.owned_nodes, 0)).toBe(24);
      for (const c of list) expect(c.owned_nodes).toBeGreaterThan(0);
      console.log(`shares seen from ${url}: ${list.map((c) => `${c.hostname}=${c.owned_nodes}`).join(" ")}`);
    }
    // a node's `conductor` is its owner on the ring, and both conductors agree
    for (const uuid of uuids.slice(0, 6)) {
      const [fromA, fromB] = await Promise.all(
        [a.url, b.url].map(
          async (url) => (await api(`${url}/v1/nodes/${uuid}`)).body as { conductor: string },
        ),
      );
      expect(["cond-a", "cond-b"]).toContain(fromA!.conductor);
      expect(fromB!.conductor).toBe(fromA!.conductor);
    }
    const one = (await api(`${b.url}/v1/conductors/cond-a`)).body as ConductorView;
    expect(one.alive).toBe(true);
    expect((await api(`${b.url}/v1/conductors/nope`)).status).toBe(404);
  });

  it("node actions sent to either conductor run on the node's owner", async () => {
    const nodes = (
      (await api(`${a.url}/v1/nodes?fields=uuid,conductor`)).body as {
        nodes: { uuid: string; conductor: string }[];
      }
    ).nodes;
    const target = { "cond-a": b.url, "cond-b": a.url } as Record<string, string>;
    const picks = ["cond-a", "cond-b"].map((owner) => nodes.find((n) => n.conductor === owner)!);
    for (const node of picks) {
      // sent to the conductor that does NOT own it
      const put = await api(`${target[node.conductor]}/v1/nodes/${node.uuid}/states/provision`, {
        method: "PUT",
        body: { target: "manage" },
      });
      expect(put.status).toBe(202);
      const now = (await api(`${a.url}/v1/nodes/${node.uuid}`)).body as { reservation: string | null };
      expect(now.reservation?.split("/")[0]).toBe(node.conductor);
    }
    // errors come back from the owner unchanged, in Ironic's envelope
    const bad = await api(`${target[picks[0]!.conductor]}/v1/nodes/${picks[0]!.uuid}/states/provision`, {
      method: "PUT",
      body: { target: "no-such-verb" },
    });
    expect(bad.status).toBe(400);
    expect(faultOf(bad.body)).toBeTruthy();
    for (const node of picks) await waitForState(a.url, node.uuid, "manageable");
  });

  it("a second live process under a taken name refuses to start", async () => {
    const twin = createConductor({ ...a.config, port: 0, name: "cond-a" }, { logger: silentLogger });
    await expect(twin.start()).rejects.toThrow(ConductorAlreadyRegistered);
    await twin.stop();
  });

  it("a conductor that stops leaves the ring: the other owns every node", async () => {
    await b.stop();
    const list = await conductors(a.url);
    expect(list.find((c) => c.hostname === "cond-b")?.alive).toBe(false);
    expect(list.find((c) => c.hostname === "cond-a")?.owned_nodes).toBe(24);
  });
});
