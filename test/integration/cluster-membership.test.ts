import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConductorAlreadyRegistered } from "../../conductor/db/store.ts";
import { createConductor } from "../../conductor/server.ts";
import { silentLogger } from "../../shared/log.ts";
import { api, startConductor } from "../helpers/conductor.ts";

type ConductorView = { hostname: string; alive: boolean; owned_nodes: number; conductor_group: string };

let a: Awaited<ReturnType<typeof startConductor>>;
let b: { url: string; stop(): Promise<void> };

beforeAll(async () => {
  a = await startConductor({ name: "cond-a" });
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
