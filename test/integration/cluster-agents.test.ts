import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { readFile, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { COMMANDS } from "../../agent/commands/registry.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { AgentLink } from "../../agent/link/client.ts";
import { agentEndpointOf } from "../../conductor/agents/endpoint.ts";
import { HashRing } from "../../conductor/cluster/hash-ring.ts";
import type { FakeBoot } from "../../conductor/drivers/boot/fake.ts";
import { silentLogger } from "../../shared/log.ts";
import { recordingLogger, sampleInventory } from "../helpers/agent.ts";
import { waitFor } from "../helpers/wait.ts";
import { sha256 } from "../helpers/disk.ts";
import { startHttpImageServer } from "../helpers/http-image-server.ts";
import { runOk } from "../helpers/run.ts";
import { api, clusterFormed, faultOf, startConductor, waitForState } from "../helpers/conductor.ts";

type Ctx = Awaited<ReturnType<typeof startConductor>>;
type NodeView = {
  uuid: string;
  provision_state: string;
  reservation: string | null;
  conductor: string | null;
  driver_internal_info: Record<string, unknown>;
  provision_updated_at: string | null;
};

const dir = mkdtempSync(join(tmpdir(), "anvil-cluster-agents-"));
let databaseCounter = 0;
const running: Array<{ stop(): Promise<void> }> = [];
let macCounter = 0x20;

afterEach(async () => {
  for (const item of running.splice(0).reverse()) await item.stop().catch(() => undefined);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Conductors named `names` on one fresh SQLite file (short heartbeats), started in order. */
async function cluster(
  names: string[],
  options: { fakeDelayMs?: number; logger?: ReturnType<typeof recordingLogger> } = {},
) {
  const databasePath = join(dir, `cluster-${databaseCounter++}.sqlite`);
  const started: Ctx[] = [];
  for (const name of names) started.push(await member(name, databasePath, options));
  await waitFor(() => clusterFormed(started), {
    what: "every conductor to see the others",
  });
  return { databasePath, conductors: started };
}

async function member(
  name: string,
  databasePath: string,
  options: { fakeDelayMs?: number; logger?: ReturnType<typeof recordingLogger>; fastTrack?: boolean } = {},
): Promise<Ctx> {
  const ctx = await startConductor(
    {
      name,
      databasePath,
      fakeDelayMs: options.fakeDelayMs ?? 0,
      agent: { fastTrack: options.fastTrack ?? false },
      cluster: { heartbeatIntervalS: 0.3, deadAfterS: 1.5 },
      timeoutCheckIntervalS: 0.3,
    },
    { logger: options.logger ?? silentLogger },
  );
  running.push(ctx);
  return ctx;
}

/** A node uuid whose owner on the ring of `members` is `owner` (and, if given, whose replica is `next`). */
function uuidOwnedBy(members: string[], owner: string, next?: string): string {
  const ring = new HashRing(members);
  for (;;) {
    const uuid = randomUUID();
    const [first, second] = ring.lookup(uuid, 2);
    if (first === owner && (next === undefined || second === next)) return uuid;
  }
}

/** A fake-hardware node with the agent's deploy interface, a port, and a simulated machine on a sparse disk file. */
async function agentNode(url: string, uuid: string) {
  const mac = `52:54:00:00:07:${(macCounter++).toString(16).padStart(2, "0")}`;
  const disk = join(dir, `${uuid}.disk`);
  await writeFile(disk, "");
  await truncate(disk, 64 * 1024 * 1024);
  const created = await api(`${url}/v1/nodes`, {
    method: "POST",
    body: { uuid, name: `n-${uuid.slice(0, 8)}`, driver: "fake-hardware", deploy_interface: "direct" },
  });
  expect(created.status).toBe(201);
  expect(
    (await api(`${url}/v1/ports`, { method: "POST", body: { node_uuid: uuid, address: mac } })).status,
  ).toBe(201);
  const backend = new SimulatedBackend({ inventory: sampleInventory({ macs: [mac], diskFile: disk }) });
  return {
    /** Starts the node's agent dialling `urls` in order (as its kernel command line lists them). */
    boot(urls: string[]): AgentLink {
      const [first, ...others] = urls;
      const link = new AgentLink({
        url: first!,
        otherUrls: others,
        backend,
        commands: COMMANDS,
        logger: silentLogger,
        agentVersion: "test",
        backoff: { initialMs: 50, maxMs: 400 },
      });
      link.start();
      running.push(link);
      return link;
    },
  };
}

const provision = (url: string, node: string, target: string) =>
  api(`${url}/v1/nodes/${node}/states/provision`, { method: "PUT", body: { target } });
const getNode = async (url: string, node: string) => (await api(`${url}/v1/nodes/${node}`)).body as NodeView;
const fakeBoot = (ctx: Ctx) => ctx.conductor.drivers.get("fake-hardware")!.boot as FakeBoot;
const ws = (ctx: Ctx) => agentEndpointOf(ctx.url);

/** Puts a node into "clean wait" (automated cleaning needs the agent) through `url`. */
async function toCleanWait(url: string, uuid: string): Promise<void> {
  expect((await provision(url, uuid, "manage")).status).toBe(202);
  await waitForState(url, uuid, "manageable");
  expect((await provision(url, uuid, "provide")).status).toBe(202);
  await waitForState(url, uuid, "clean wait");
}

describe("agents in a cluster of conductors", () => {
  it("the ramdisk is told every live conductor, its owner first; an agent dialling a non-owner is redirected and keeps going there", async () => {
    const gatewayLog = recordingLogger();
    const {
      conductors: [a, b],
    } = await cluster(["c-a", "c-b"], { logger: gatewayLog });
    const uuid = uuidOwnedBy(["c-a", "c-b"], "c-b");
    const node = await agentNode(a!.url, uuid);
    await toCleanWait(a!.url, uuid); // sent to c-a, forwarded to the owner c-b, which boots the ramdisk

    const prepared = fakeBoot(b!).stateOf(uuid);
    expect(prepared.kind).toBe("ramdisk");
    expect(prepared.kind === "ramdisk" && prepared.agentParams["anvil.conductor"]).toBe(
      `${ws(b!)},${ws(a!)}`,
    );
    expect(fakeBoot(a!).stateOf(uuid).kind).toBe("none");

    const link = node.boot([ws(a!)]); // the agent dials the non-owner only
    await waitForState(a!.url, uuid, "available");
    expect(b!.conductor.gateway.isConnected(uuid) || link.conductorUrl === ws(b!)).toBe(true);
    expect(link.conductorUrl).toBe(ws(b!));
    expect(a!.conductor.gateway.isConnected(uuid)).toBe(false);
    expect(gatewayLog.lines.some((l) => l.includes("agent redirected to its node's owner"))).toBe(true);
    // the token was issued by the owner only: the non-owner redirected before issuing one
    expect(gatewayLog.lines.filter((l) => l.includes('"token_issued":true')).length).toBe(1);
  });

  it("takeover keeps a node waiting for its agent: the new owner re-writes its boot files, restarts the wait, and the agent that dials it finishes the job", async () => {
    const {
      databasePath,
      conductors: [a, b],
    } = await cluster(["c-a", "c-b"]);
    const uuid = uuidOwnedBy(["c-a", "c-b"], "c-a");
    const node = await agentNode(b!.url, uuid);
    await toCleanWait(b!.url, uuid);
    const before = await getNode(b!.url, uuid);
    expect(before.driver_internal_info.ramdisk_prepared_by).toBe(a!.conductor.membership.identity);
    expect(databasePath).toContain("cluster-");

    await a!.stop(); // its boot files (and its fake boot's memory) are gone with it
    await waitFor(() => fakeBoot(b!).stateOf(uuid).kind === "ramdisk", {
      what: "the new owner to re-write the boot files",
      timeoutMs: 20_000,
    });
    const prepared = fakeBoot(b!).stateOf(uuid);
    expect(prepared.kind === "ramdisk" && prepared.agentParams["anvil.conductor"]).toBe(ws(b!));
    const adopted = await getNode(b!.url, uuid);
    expect(adopted.provision_state).toBe("clean wait");
    expect(adopted.reservation).toBeNull();
    expect(adopted.conductor).toBe("c-b");
    expect(adopted.driver_internal_info.ramdisk_prepared_by).toBe(b!.conductor.membership.identity);
    expect(Date.parse(adopted.provision_updated_at!)).toBeGreaterThan(
      Date.parse(before.provision_updated_at!),
    );

    // the agent boots from the old list (the dead conductor first): it moves on to the live one
    const link = node.boot([ws(a!), ws(b!)]);
    await waitForState(b!.url, uuid, "available");
    expect(link.conductorUrl).toBe(ws(b!));
  });

  it("a rejoining conductor that becomes a node's owner waits for the live holder's lock, then takes the node over", async () => {
    const databasePath = join(dir, `cluster-${databaseCounter++}.sqlite`);
    const b = await member("c-b", databasePath, { fakeDelayMs: 2500 });
    const uuid = uuidOwnedBy(["c-a", "c-b"], "c-a");
    const created = await api(`${b.url}/v1/nodes`, {
      method: "POST",
      body: { uuid, driver: "fake-hardware", instance_info: { image_source: "http://127.0.0.1/x.img" } },
    });
    expect(created.status).toBe(201);
    expect((await provision(b.url, uuid, "manage")).status).toBe(202);
    await waitForState(b.url, uuid, "manageable");
    expect((await provision(b.url, uuid, "provide")).status).toBe(202);
    await waitForState(b.url, uuid, "available");
    expect((await provision(b.url, uuid, "active")).status).toBe(202);
    const holder = b.conductor.membership.identity;
    expect((await getNode(b.url, uuid)).reservation).toBe(holder);

    // c-a joins: the ring now gives it the node, which c-b is still deploying
    const a = await member("c-a", databasePath);
    await waitFor(() => a.conductor.membership.owns({ uuid, conductor_group: "" }), {
      what: "c-a to own it",
    });
    const during = await getNode(a.url, uuid);
    expect(during.conductor).toBe("c-a");
    expect(during.provision_state).toBe("deploying");
    expect(during.reservation).toBe(holder); // never broken
    const refused = await api(`${a.url}/v1/nodes/${uuid}/states/power`, {
      method: "PUT",
      body: { target: "power off" },
    });
    expect(refused.status).toBe(409);
    expect(faultOf(refused.body)).toMatch(/locked by host/i);

    const done = await waitForState(a.url, uuid, "active");
    expect(done.reservation).toBeNull();
    expect(done.last_error).toBeNull();
    // the owner now works on it
    expect((await provision(b.url, uuid, "deleted")).status).toBe(202);
    await waitForState(a.url, uuid, "available");
  });

  it("after a rebalance, an idle agent (fast track) is sent to its node's new owner, which can then use it", async () => {
    const databasePath = join(dir, `cluster-${databaseCounter++}.sqlite`);
    const b = await member("c-b", databasePath, { fastTrack: true });
    const uuid = uuidOwnedBy(["c-a", "c-b"], "c-a");
    const node = await agentNode(b.url, uuid);
    await toCleanWait(b.url, uuid);
    const link = node.boot([ws(b)]);
    await waitForState(b.url, uuid, "available");
    expect(b.conductor.gateway.isConnected(uuid)).toBe(true); // fast track keeps the agent

    const a = await member("c-a", databasePath, { fastTrack: true });
    await waitFor(() => a.conductor.gateway.isConnected(uuid), {
      what: "the agent to move to the new owner",
      timeoutMs: 20_000,
    });
    expect(b.conductor.gateway.isConnected(uuid)).toBe(false);
    expect(link.conductorUrl).toBe(ws(a));
    // the owner commands it: manual cleaning runs its step on the fast-track agent now connected to c-a
    expect((await provision(b.url, uuid, "manage")).status).toBe(202);
    await waitForState(a.url, uuid, "manageable");
    const clean = await api(`${b.url}/v1/nodes/${uuid}/states/provision`, {
      method: "PUT",
      body: { target: "clean", clean_steps: [{ interface: "deploy", step: "erase_devices_metadata" }] },
    });
    expect(clean.status).toBe(202);
    const cleaned = await waitForState(a.url, uuid, "manageable");
    expect(cleaned.last_error).toBeNull();
    expect(a.conductor.gateway.isConnected(uuid)).toBe(true);
  });

  it("takeover of an active node: the new owner writes its instance boot configuration again", async () => {
    const images = await startHttpImageServer();
    running.push({ stop: () => images.close() });
    const file = join(dir, "instance.raw");
    await writeFile(file, Buffer.alloc(4 * 1024 * 1024));
    await runOk("sfdisk", ["--quiet", "--label", "gpt", file], { input: "start=2048, size=4096\n" });
    images.serve("/instance.raw", file);
    const {
      conductors: [a, b],
    } = await cluster(["c-a", "c-b"]);
    const uuid = uuidOwnedBy(["c-a", "c-b"], "c-a");
    const node = await agentNode(b!.url, uuid);
    const patch = await api(`${b!.url}/v1/nodes/${uuid}`, {
      method: "PATCH",
      body: [
        { op: "add", path: "/automated_clean", value: false },
        { op: "add", path: "/instance_info/image_source", value: `${images.url}/instance.raw` },
        { op: "add", path: "/instance_info/image_os_hash_algo", value: "sha256" },
        { op: "add", path: "/instance_info/image_os_hash_value", value: sha256(await readFile(file)) },
      ],
    });
    expect(patch.status).toBe(200);
    for (const target of ["manage", "provide"])
      expect((await provision(b!.url, uuid, target)).status).toBe(202);
    await waitForState(b!.url, uuid, "available");
    expect((await provision(b!.url, uuid, "active")).status).toBe(202);
    await waitForState(b!.url, uuid, "wait call-back");
    node.boot([ws(a!)]);
    const deployed = (await waitForState(b!.url, uuid, "active")) as unknown as NodeView;
    expect(deployed.driver_internal_info.instance_prepared_by).toBe(a!.conductor.membership.identity);
    expect(fakeBoot(a!).stateOf(uuid).kind).toBe("instance");
    expect(fakeBoot(b!).stateOf(uuid).kind).toBe("none");

    await a!.stop();
    await waitFor(() => fakeBoot(b!).stateOf(uuid).kind === "instance", {
      what: "the new owner to write the instance boot files",
      timeoutMs: 20_000,
    });
    const adopted = await getNode(b!.url, uuid);
    expect(adopted.provision_state).toBe("active");
    expect(adopted.reservation).toBeNull();
    expect(adopted.driver_internal_info.instance_prepared_by).toBe(b!.conductor.membership.identity);
  });
});
