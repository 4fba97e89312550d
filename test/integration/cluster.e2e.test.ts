import type { ChildProcess } from "node:child_process";
import { execFile } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { readFile, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newNode } from "../../conductor/operations/node-record.ts";
import { agentEndpointOf } from "../../conductor/agents/endpoint.ts";
import { HashRing } from "../../conductor/cluster/hash-ring.ts";
import { openStore } from "../../conductor/db/open-store.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import { defaultConfig } from "../../conductor/config.ts";
import {
  ensureAgentBuilt,
  sampleInventory,
  startAgentProcess,
  writeSimulatedMachine,
  type AgentProcess,
} from "../helpers/agent.ts";
import { basic, writeUserFiles } from "../helpers/auth.ts";
import { api as plainApi, spawnConductor } from "../helpers/conductor.ts";
import { sha256 } from "../helpers/disk.ts";
import { startHttpImageServer, type HttpImageServer } from "../helpers/http-image-server.ts";
import { startPostgres, type ThrowawayPostgres } from "../helpers/postgres.ts";
import { runOk } from "../helpers/run.ts";
import { until } from "../helpers/wait.ts";

const run = promisify(execFile);
const NAMES = ["c1", "c2", "c3"] as const;
type Name = (typeof NAMES)[number];
/** Every fake step (power action, fake deploy) takes this long: deploys are caught in flight. */
const FAKE_DELAY_MS = 2500;
const DEAD_AFTER_S = 3;
const FAKE_NODES = 30;
const MiB = 1024 * 1024;

type NodeView = {
  uuid: string;
  name: string | null;
  provision_state: string;
  reservation: string | null;
  last_error: string | null;
  conductor: string | null;
  driver_internal_info: Record<string, unknown>;
};

let pg: ThrowawayPostgres;
let database = "";
let images: HttpImageServer;
let executable = "";
const dir = mkdtempSync(join(tmpdir(), "anvil-cluster-e2e-"));
const urls = new Map<Name, string>();
const children = new Map<Name, ChildProcess>();
const agents: AgentProcess[] = [];

// the cluster runs as an operator would: http_basic with roles, and the cluster secret between conductors
const ADMIN = { name: "admin", password: "admin-pass", role: "admin" as const };
const userFiles = writeUserFiles(dir, [ADMIN]);
const secretFile = join(dir, "cluster.secret");
writeFileSync(secretFile, randomBytes(32).toString("hex"), { mode: 0o600 });
const asAdmin = basic(ADMIN.name, ADMIN.password);

/** The API as the administrator (Basic credentials unless the call brings its own Authorization). */
const api = (target: string, init: Parameters<typeof plainApi>[1] = {}) =>
  plainApi(target, { ...init, headers: { ...asAdmin, ...init.headers } });

function conductorArgs(name: Name): string[] {
  return [
    ...["--auth-strategy", "http_basic", "--http-basic-auth-user-file", userFiles.userFile],
    ...["--cluster-secret-file", secretFile],
    ...["--db", database, "--name", name, "--data-dir", join(dir, name)],
    ...["--heartbeat-interval", "1", "--dead-after", String(DEAD_AFTER_S), "--power-sync-interval", "0"],
    ...["--timeout-check-interval-s", "1", "--fake-delay-ms", String(FAKE_DELAY_MS), "--log-level", "info"],
  ];
}

async function startMember(name: Name): Promise<void> {
  const { child, url } = await spawnConductor(conductorArgs(name));
  children.set(name, child);
  urls.set(name, url);
}

beforeAll(async () => {
  [pg, executable, images] = await Promise.all([startPostgres(), ensureAgentBuilt(), startHttpImageServer()]);
  database = await pg.freshDatabase("cluster_e2e");
  // one conductor first (it migrates the schema), then the two others at once
  await startMember("c1");
  await Promise.all([startMember("c2"), startMember("c3")]);
}, 300_000);

afterAll(async () => {
  for (const agent of agents) await agent.stop().catch(() => undefined);
  for (const child of children.values()) child.kill("SIGKILL");
  await images?.close();
  await pg?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const url = (name: Name): string => urls.get(name)!;

/** The stock client from Debian's python3-ironicclient, pointed at one conductor. */
async function baremetal(name: Name, ...args: string[]): Promise<unknown> {
  // the password through the environment (the client reads OS_PASSWORD as --os-password), never argv
  const { stdout } = await run(
    "baremetal",
    [
      ...["--os-auth-type", "http_basic", "--os-username", ADMIN.name],
      ...["--os-endpoint", url(name), ...args, "-f", "json"],
    ],
    { env: { ...process.env, OS_CLOUD: "", OS_PASSWORD: ADMIN.password }, timeout: 60_000 },
  );
  return JSON.parse(stdout) as unknown;
}

/** A field of a CLI row whatever its label ("UUID", "Conductor"…). */
function column(row: Record<string, unknown>, name: string): unknown {
  const key = Object.keys(row).find((k) => k.toLowerCase().replace(/ /g, "_") === name);
  return key === undefined ? undefined : row[key];
}

const getNode = async (name: Name, uuid: string) =>
  (await api(`${url(name)}/v1/nodes/${uuid}`)).body as NodeView;
const provision = (name: Name, uuid: string, body: Record<string, unknown>) =>
  api(`${url(name)}/v1/nodes/${uuid}/states/provision`, { method: "PUT", body });

async function settle(name: Name, uuid: string, states: string[]): Promise<NodeView> {
  return until(
    async () => {
      const node = await getNode(name, uuid);
      return states.includes(node.provision_state) && node.reservation === null ? node : undefined;
    },
    { what: `${uuid} to reach ${states.join("|")}` },
  );
}

/** A uuid the ring of all three places on `owner`, with `next` as the conductor that takes it over. */
function uuidOwnedBy(owner: Name, next: Name): string {
  const ring = new HashRing([...NAMES]);
  for (;;) {
    const uuid = randomUUID();
    const [first, second] = ring.lookup(uuid, 2);
    if (first === owner && second === next) return uuid;
  }
}

/** A whole-disk image (GPT, one partition with random data) served over HTTP on 127.0.0.1. */
async function serveImage(): Promise<{ url: string; sha: string }> {
  const file = join(dir, "disk.raw");
  await writeFile(file, Buffer.alloc(12 * MiB));
  await runOk("sfdisk", ["--quiet", "--label", "gpt", file], {
    input: "start=2048, size=16384, name=rootfs\n",
  });
  const image = await readFile(file);
  randomBytes(4 * MiB).copy(image, 2 * MiB);
  await writeFile(file, image);
  images.serve("/disk.raw", file);
  return { url: `${images.url}/disk.raw`, sha: sha256(image) };
}

describe("three conductors on one PostgreSQL", () => {
  it("share one fleet, survive a SIGKILL mid-deploy (agent deploy included), and race allocations fairly", async () => {
    // ---- the fleet, seen alike from every conductor through the stock CLI ----
    const fake: string[] = [];
    for (let i = 0; i < FAKE_NODES; i++) {
      const created = await api(`${url(NAMES[i % 3]!)}/v1/nodes`, {
        method: "POST",
        body: { name: `f-${i}`, driver: "fake-hardware", automated_clean: false },
      });
      expect(created.status).toBe(201);
      fake.push((created.body as NodeView).uuid);
    }
    // the agent-driven node: owned by c1 (the one killed below), c3 takes it over, c2 is a non-owner
    const agentUuid = uuidOwnedBy("c1", "c3");
    const mac = "52:54:00:0e:2e:01";
    const disk = join(dir, "agent-node.disk");
    await writeFile(disk, "");
    await truncate(disk, 1024 * MiB);
    const machine = await writeSimulatedMachine(dir, sampleInventory({ macs: [mac], diskFile: disk }));
    const image = await serveImage();
    const createdAgentNode = await api(`${url("c2")}/v1/nodes`, {
      method: "POST",
      body: {
        uuid: agentUuid,
        name: "agent-node",
        driver: "fake-hardware",
        deploy_interface: "direct",
        automated_clean: false,
        instance_info: {
          image_source: image.url,
          image_os_hash_algo: "sha256",
          image_os_hash_value: image.sha,
        },
      },
    });
    expect(createdAgentNode.status).toBe(201);
    expect(
      (await api(`${url("c2")}/v1/ports`, { method: "POST", body: { node_uuid: agentUuid, address: mac } }))
        .status,
    ).toBe(201);
    const all = [...fake, agentUuid];

    const shares = new Map<string, Map<string, number>>();
    for (const name of NAMES) {
      const rows = (await baremetal(name, "node", "list", "--fields", "uuid", "conductor")) as Record<
        string,
        unknown
      >[];
      const share = new Map<string, number>();
      for (const row of rows) {
        const owner = String(column(row, "conductor"));
        share.set(owner, (share.get(owner) ?? 0) + 1);
      }
      expect(rows.map((r) => column(r, "uuid")).sort()).toEqual([...all].sort());
      shares.set(name, share);
      const conductorRows = (await baremetal(name, "conductor", "list")) as Record<string, unknown>[];
      expect(conductorRows.map((r) => [column(r, "hostname"), column(r, "alive")]).sort()).toEqual([
        ["c1", true],
        ["c2", true],
        ["c3", true],
      ]);
    }
    const seen = [...shares.values()].map((s) => JSON.stringify([...s].sort()));
    expect(new Set(seen).size).toBe(1); // every conductor reports the same owner for every node
    const share = shares.get("c1")!;
    for (const name of NAMES) expect(share.get(name) ?? 0).toBeGreaterThan(0);
    console.log(
      `cluster e2e: ${all.length} nodes, shares by the ring: ${NAMES.map((n) => `${n}=${share.get(n) ?? 0}`).join(" ")}`,
    );

    // ---- a bearer token issued by one conductor works through it on nodes the others own ----
    const issued = await api(`${url("c2")}/v1/auth/tokens`, { method: "POST" });
    expect(issued.status).toBe(201);
    const bearer = { Authorization: `Bearer ${(issued.body as { token: string }).token}` };
    const ring = new HashRing([...NAMES]);
    const elsewhere = fake.filter((uuid) => ring.lookup(uuid, 1)[0] !== "c2").slice(0, 2);
    expect(elsewhere.length).toBe(2);
    for (const uuid of elsewhere) {
      const set = await api(`${url("c2")}/v1/nodes/${uuid}/management/boot_device`, {
        method: "PUT",
        body: { boot_device: "pxe", persistent: true },
        headers: bearer,
      });
      expect(set.status).toBe(204);
      // fake management keeps the device on the conductor that set it: the owner
      const owner = ring.lookup(uuid, 1)[0] as Name;
      const atOwner = await api(`${url(owner)}/v1/nodes/${uuid}/management/boot_device`, { headers: bearer });
      expect(atOwner.body).toEqual({ boot_device: "pxe", persistent: true });
    }

    // ---- every node to available (sent round-robin: each request runs on the node's owner) ----
    await Promise.all(
      all.map(async (uuid, i) => {
        expect((await provision(NAMES[i % 3]!, uuid, { target: "manage" })).status).toBe(202);
        await settle("c1", uuid, ["manageable"]);
        expect((await provision(NAMES[(i + 1) % 3]!, uuid, { target: "provide" })).status).toBe(202);
        await settle("c1", uuid, ["available"]);
      }),
    );

    // ---- the agent node reaches "wait call-back" under c1: its ramdisk boot names every conductor ----
    expect((await provision("c2", agentUuid, { target: "active" })).status).toBe(202);
    const waiting = await settle("c1", agentUuid, ["wait call-back"]);
    expect(String(waiting.driver_internal_info.ramdisk_prepared_by)).toMatch(/^c1\//);

    // ---- 30 fake deploys, then SIGKILL c1 while its share is mid-deploy ----
    for (const [i, uuid] of fake.entries()) {
      expect((await provision(NAMES[i % 3]!, uuid, { target: "active" })).status).toBe(202);
    }
    const before = await Promise.all(fake.map((u) => getNode("c2", u)));
    const inFlightOnC1 = before.filter((n) => n.reservation?.startsWith("c1/")).map((n) => n.uuid);
    expect(inFlightOnC1.length).toBeGreaterThan(0);
    children.get("c1")!.kill("SIGKILL");
    const killedAt = Date.now();
    console.log(`cluster e2e: SIGKILL c1 with ${inFlightOnC1.length} of its deploys in flight`);

    // within the heartbeat timeout, every node has a live owner (seen from both survivors)
    const ownedAt = await until(
      async () => {
        for (const name of ["c2", "c3"] as const) {
          const nodes = await Promise.all(all.map((u) => getNode(name, u)));
          if (!nodes.every((n) => n.conductor === "c2" || n.conductor === "c3")) return undefined;
        }
        return Date.now();
      },
      { what: "c1's nodes to get a live owner" },
    );
    console.log(
      `cluster e2e: live owners for all ${all.length} nodes ${ownedAt - killedAt} ms after SIGKILL (dead after ${DEAD_AFTER_S} s)`,
    );

    // in-flight deploys end active or failed with the reason; no dead reservation is left
    const settled = await Promise.all(fake.map((u) => settle("c2", u, ["active", "deploy failed"])));
    for (const node of settled) {
      expect(node.reservation).toBeNull();
      if (node.provision_state === "deploy failed") {
        expect(inFlightOnC1).toContain(node.uuid);
        expect(node.last_error).toMatch(
          /Conductor c1 stopped heartbeating while the node was in "deploying"/,
        );
      } else {
        expect(node.last_error).toBeNull();
      }
    }
    const failed = settled.filter((n) => n.provision_state === "deploy failed").length;
    console.log(
      `cluster e2e: ${settled.length - failed} fake deploys active, ${failed} failed by the takeover`,
    );

    // ---- the agent node: c3 adopted it (boot files re-written there), the agent boots and finishes there ----
    const adopted = await until(
      async () => {
        const node = await getNode("c3", agentUuid);
        return String(node.driver_internal_info.ramdisk_prepared_by).startsWith("c3/") ? node : undefined;
      },
      { what: "c3 to adopt the waiting agent node" },
    );
    expect(adopted.provision_state).toBe("wait call-back");
    expect(adopted.conductor).toBe("c3");
    // the ramdisk's list as c1 wrote it: c1 (dead) first, then c2 (not the owner: it redirects to c3)
    const agent = startAgentProcess({
      executable,
      args: [
        ...["service", "--conductor", NAMES.map((n) => agentEndpointOf(url(n))).join(",")],
        ...["--backend", "simulated", "--inventory", machine],
      ],
    });
    agents.push(agent);
    const active = await settle("c2", agentUuid, ["active", "deploy failed"]);
    expect(active.last_error).toBeNull();
    expect(active.provision_state).toBe("active");
    expect(images.requests.some((r) => r.path === "/disk.raw")).toBe(true);
    expect(agent.stderr()).toMatch(/redirected to the node's owner/);
    console.log(`cluster e2e: agent node active through c3, ${Date.now() - killedAt} ms after SIGKILL`);
    await agent.stop();

    // ---- c1 rejoins (a new identity); 200 allocations raced across the three for 100 matching nodes ----
    await startMember("c1");
    await until(
      async () => {
        const list = ((await api(`${url("c2")}/v1/conductors`)).body as { conductors: { alive: boolean }[] })
          .conductors;
        return list.filter((c) => c.alive).length === 3 ? true : undefined;
      },
      { what: "all three alive again" },
    );
    const store = openStore(database);
    const matching = new Set<string>();
    try {
      const hw = defaultDrivers(defaultConfig({ dataDir: join(dir, "seed") })).get("fake-hardware")!;
      for (let i = 0; i < 100; i++) {
        const node = await store.createNode({
          ...newNode({ driver: "fake-hardware", name: `race-${i}` }, hw),
          provision_state: "available",
          power_state: "power off",
          resource_class: "e2e-race",
        });
        matching.add(node.uuid);
      }
    } finally {
      await store.close();
    }
    const answers = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const began = performance.now();
        const response = await api(`${url(NAMES[i % 3]!)}/v1/allocations`, {
          method: "POST",
          body: { resource_class: "e2e-race" },
        });
        const body = response.body as { state: string; node_uuid: string | null; last_error: string | null };
        return { status: response.status, body, ms: performance.now() - began };
      }),
    );
    expect(answers.every((a) => a.status === 201)).toBe(true);
    const won = answers.filter((a) => a.body.state === "active");
    const lost = answers.filter((a) => a.body.state === "error");
    expect(won).toHaveLength(100);
    expect(lost).toHaveLength(100);
    expect(new Set(won.map((a) => a.body.node_uuid))).toEqual(matching);
    for (const loser of lost) expect(loser.body.last_error).toMatch(/no available nodes match/);
    const times = lost.map((a) => a.ms).sort((x, y) => x - y);
    const winners = won.map((a) => a.ms).sort((x, y) => x - y);
    console.log(
      `cluster e2e: allocations 100 active, 100 refused (200 sent at once); loser answered p50 ${times[49]!.toFixed(0)} ms, max ${times[99]!.toFixed(0)} ms; winner p50 ${winners[49]!.toFixed(0)} ms`,
    );
  }, 240_000);
});
