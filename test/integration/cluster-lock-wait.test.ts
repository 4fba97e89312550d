import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { api, faultOf, released, spawnConductor, waitForState } from "../helpers/conductor.ts";
import { clusterSuite } from "../helpers/cluster-suite.ts";

/**
 * node_locked_retry across conductor processes: a request that takes the node's lock on the conductor that
 * received it (a VIF attach, as Nova's driver sends it to any API) finds the lock held by the node's owner, a
 * different process, and polls the shared database until the owner lets go; a request that runs on the owner
 * (a provision verb, forwarded) waits for the owner's own release. fake-hardware's delay keeps the owner's
 * power task on the lock for 1.5 s, long enough that a loaded machine still sends each request while it is
 * held; the retry interval is 2 s, so the wait (up to 4 s) outlasts it. With node_locked_retry.attempts 1
 * (no wait) both are refused 409.
 */

type Node = { uuid: string; conductor: string | null; reservation: string | null };
type Conductor = { name: string; url: string };

const suite = clusterSuite("anvil-lock-wait-");
const { dir, children } = suite;

/** Two conductors on one fresh database; `attempts` is node_locked_retry.attempts (1: no wait). */
async function cluster(label: string, attempts: number): Promise<Conductor[]> {
  const database = await suite.pg.freshDatabase(label);
  const config = join(dir, `${label}.yaml`);
  writeFileSync(config, `node_locked_retry:\n  attempts: ${attempts}\n  interval_s: 2\n`);
  const started: Conductor[] = [];
  for (const name of [`${label}-a`, `${label}-b`]) {
    const { child, url } = await spawnConductor([
      ...["--config", config, "--db", database, "--name", name, "--data-dir", join(dir, name)],
      ...["--heartbeat-interval", "1", "--power-sync-interval", "0", "--fake-delay-ms", "1500"],
    ]);
    children.push(child);
    started.push({ name, url });
  }
  // both see each other in the ring before a node's owner is asked for
  for (const { url } of started) {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const listed = await api(`${url}/v1/conductors`);
      const names = (listed.body as { conductors?: { hostname: string; alive: boolean }[] }).conductors
        ?.filter((c) => c.alive)
        .map((c) => c.hostname);
      if (started.every((c) => names?.includes(c.name))) break;
      if (Date.now() > deadline)
        throw new Error(`${url} never saw both conductors: ${JSON.stringify(names)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return started;
}

/** A node with a port (for a VIF), its owner holding it in a power task, and the other conductor. */
async function heldByOwner(conductors: Conductor[], mac: string) {
  const [first] = conductors;
  const created = await api(`${first!.url}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware" } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const uuid = (created.body as Node).uuid;
  const port = await api(`${first!.url}/v1/ports`, {
    method: "POST",
    body: { node_uuid: uuid, address: mac },
  });
  expect(port.status, JSON.stringify(port.body)).toBe(201);
  await released(first!.url, uuid);
  const ownerName = ((await api(`${first!.url}/v1/nodes/${uuid}`)).body as Node).conductor;
  const owner = conductors.find((c) => c.name === ownerName);
  const other = conductors.find((c) => c.name !== ownerName);
  expect(owner, `owner ${String(ownerName)}`).toBeDefined();
  const power = await api(`${owner!.url}/v1/nodes/${uuid}/states/power`, {
    method: "PUT",
    body: { target: "power on" },
  });
  expect(power.status, JSON.stringify(power.body)).toBe(202);
  const held = (await api(`${other!.url}/v1/nodes/${uuid}`)).body as Node;
  // the owner's process holds the lock: the other conductor can only see it in the database
  expect(held.reservation?.startsWith(`${owner!.name}/`), JSON.stringify(held)).toBe(true);
  return { uuid, owner: owner!, other: other! };
}

describe("a request meets a lock held by another conductor process", () => {
  it("a VIF attach on the other conductor polls until the owner lets go, then attaches", async () => {
    const conductors = await cluster("wait", 3);
    const { uuid, other } = await heldByOwner(conductors, "52:54:00:1c:00:01");
    const attach = await api(`${other.url}/v1/nodes/${uuid}/vifs`, { method: "POST", body: { id: "vif-1" } });
    expect(attach.status, JSON.stringify(attach.body)).toBe(204);
    const listed = await api(`${other.url}/v1/nodes/${uuid}/vifs`);
    expect((listed.body as { vifs: { id: string }[] }).vifs.map((v) => v.id)).toEqual(["vif-1"]);
    expect(((await api(`${other.url}/v1/nodes/${uuid}`)).body as { power_state: string }).power_state).toBe(
      "power on",
    );
  });

  it("a provision verb sent to the other conductor is forwarded and waits for the owner's release", async () => {
    const conductors = await cluster("fwd", 3);
    const { uuid, other } = await heldByOwner(conductors, "52:54:00:1c:00:02");
    const manage = await api(`${other.url}/v1/nodes/${uuid}/states/provision`, {
      method: "PUT",
      body: { target: "manage" },
    });
    expect(manage.status, JSON.stringify(manage.body)).toBe(202);
    await waitForState(other.url, uuid, "manageable");
  });

  it("control: with node_locked_retry.attempts 1 both are refused 409 NodeLocked at once", async () => {
    const conductors = await cluster("nowait", 1);
    const { uuid, other } = await heldByOwner(conductors, "52:54:00:1c:00:03");
    const attach = await api(`${other.url}/v1/nodes/${uuid}/vifs`, { method: "POST", body: { id: "vif-1" } });
    expect(attach.status, JSON.stringify(attach.body)).toBe(409);
    expect(faultOf(attach.body)).toMatch(/locked by host/);
    const manage = await api(`${other.url}/v1/nodes/${uuid}/states/provision`, {
      method: "PUT",
      body: { target: "manage" },
    });
    expect(manage.status, JSON.stringify(manage.body)).toBe(409);
  });
});
