import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PeerAuth, type Asserted } from "../../conductor/auth/peer-identity.ts";
import { HashRing } from "../../conductor/cluster/hash-ring.ts";
import { silentLogger } from "../../shared/log.ts";
import { basic, writeUserFiles } from "../helpers/auth.ts";
import { clusterFormed, startConductor } from "../helpers/conductor.ts";
import { startPostgres, type ThrowawayPostgres } from "../helpers/postgres.ts";
import { waitFor } from "../helpers/wait.ts";

type Ctx = Awaited<ReturnType<typeof startConductor>>;
const dir = mkdtempSync(join(tmpdir(), "anvil-trust-"));
const secret = randomBytes(32).toString("hex");
const secretFile = join(dir, "cluster.secret");
writeFileSync(secretFile, secret, { mode: 0o600 });
const files = writeUserFiles(dir, [
  { name: "admin", password: "admin-pass", role: "admin" },
  { name: "ops", password: "ops-pass", role: "admin" },
  { name: "norole", password: "norole-pass" },
]);
let pg: ThrowawayPostgres;
let a: Ctx;
let b: Ctx;
let database: string;
/** A node the ring gives to b, so calls sent to a are forwarded. */
let onB: string;
const agents = new Map<string, Agent>();

/** An HTTP call from a given loopback address (a client distinct from the conductors' 127.0.0.1). */
async function call(
  from: string,
  url: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: unknown }> {
  let agent = agents.get(from);
  if (!agent) agents.set(from, (agent = new Agent({ localAddress: from })));
  const response = await request(url, {
    dispatcher: agent,
    method: (init.method ?? "GET") as "GET",
    headers: {
      "content-type": "application/json",
      "x-openstack-ironic-api-version": "1.78",
      ...init.headers,
    },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await response.body.text();
  return { status: response.statusCode, body: text ? (JSON.parse(text) as unknown) : null };
}

async function tokenFor(user: string, password: string, via: Ctx): Promise<Record<string, string>> {
  const issued = await call("127.0.0.1", `${via.url}/v1/auth/tokens`, {
    method: "POST",
    headers: basic(user, password),
  });
  expect(issued.status).toBe(201);
  return { authorization: `Bearer ${(issued.body as { token: string }).token}` };
}

const bootDevice = (from: string, via: Ctx, headers: Record<string, string>) =>
  call(from, `${via.url}/v1/nodes/${onB}/management/boot_device`, {
    method: "PUT",
    body: { boot_device: "pxe" },
    headers,
  });

beforeAll(async () => {
  pg = await startPostgres();
  database = await pg.freshDatabase("trust");
  const start = (name: string) =>
    startConductor(
      {
        name,
        databasePath: database,
        cluster: { heartbeatIntervalS: 0.3, deadAfterS: 1.5, secretFile },
        auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile, maxFailedLogins: 3 },
      },
      { logger: silentLogger },
    );
  a = await start("tr-a");
  b = await start("tr-b");
  await waitFor(() => clusterFormed([a, b]), {
    what: "both conductors to see each other",
  });
  const ring = new HashRing(["tr-a", "tr-b"]);
  let uuid = randomUUID();
  while (ring.lookup(uuid, 1)[0] !== "tr-b") uuid = randomUUID();
  const created = await call("127.0.0.1", `${a.url}/v1/nodes`, {
    method: "POST",
    body: { uuid, driver: "fake-hardware" },
    headers: basic("admin", "admin-pass"),
  });
  expect(created.status).toBe(201);
  onB = uuid;
});
afterAll(async () => {
  for (const agent of agents.values()) await agent.close();
  for (const c of [b, a]) await c?.stop();
  await pg?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("conductors know who asked", () => {
  it("a token issued by one conductor works through it on a node another owns; history has the client", async () => {
    const token = await tokenFor("ops", "ops-pass", a);
    expect((await bootDevice("127.0.0.2", a, token)).status).toBe(204);
    // it ran on the owner: fake management keeps the device where it was set
    const atOwner = await call("127.0.0.1", `${b.url}/v1/nodes/${onB}/management/boot_device`, {
      headers: token,
    });
    expect(atOwner.body).toMatchObject({ boot_device: "pxe" });
    const entries = await b.conductor.store.listNodeHistory(onB, {});
    const set = entries.filter((e) => e.event_type === "boot_device");
    expect(set.length).toBeGreaterThan(0);
    expect(set.map((e) => e.remote_address)).toEqual(set.map(() => "127.0.0.2"));
    expect(set.every((e) => e.user === "ops")).toBe(true);
  });

  it("a client's own forwarding headers are refused: none, forged, replayed, stale, or for another conductor", async () => {
    const url = `/v1/nodes/${onB}/management/boot_device`;
    const asserted: Asserted = {
      identity: { user: "admin", role: "admin", project: null, method: "token" },
      client: "10.9.9.9",
    };
    const self = b.conductor.membership.identity;
    const from = a.conductor.membership.identity;
    const signed = (peer: PeerAuth, to = self) => peer.sign({ method: "PUT", url, from, to }, asserted);
    const right = new PeerAuth({ secret: Buffer.from(secret) });
    const refusals: [string, Record<string, string>][] = [
      ["identity without MAC", { "x-anvil-forwarded-by": from, "x-anvil-forwarded-identity": "e30" }],
      ["bare forwarded-by", { "x-anvil-forwarded-by": from }],
      ["wrong secret", signed(new PeerAuth({ secret: randomBytes(32) }))],
      ["stale", signed(new PeerAuth({ secret: Buffer.from(secret), now: () => Date.now() - 120_000 }))],
      ["for another conductor", signed(right, from)],
    ];
    for (const [what, headers] of refusals)
      expect((await bootDevice("127.0.0.4", b, headers)).status, what).toBe(401);
    const once = signed(right);
    expect((await bootDevice("127.0.0.4", b, once)).status).toBe(204);
    expect((await bootDevice("127.0.0.4", b, once)).status, "replayed").toBe(401);
    // and with valid credentials besides, a forged identity is still refused (it is never silently dropped)
    expect(
      (await bootDevice("127.0.0.4", b, { ...basic("ops", "ops-pass"), ...refusals[0]![1] })).status,
    ).toBe(401);
  });

  it("failed and refused forwarded calls count against their client, never the forwarding conductor", async () => {
    const noRole = await tokenFor("norole", "norole-pass", a);
    for (let i = 0; i < 60; i++) expect((await bootDevice("127.0.0.5", a, noRole)).status).toBe(404);
    let last = 0;
    for (let i = 0; i < 60; i++) last = (await bootDevice("127.0.0.6", a, basic("ops", "wrong"))).status;
    expect(last).toBe(429);
    // another client of the same forwarding conductor, and the limited client at the owner, are untouched
    expect((await bootDevice("127.0.0.7", a, basic("admin", "admin-pass"))).status).toBe(204);
    expect((await bootDevice("127.0.0.5", a, basic("admin", "admin-pass"))).status).toBe(204);
    expect((await bootDevice("127.0.0.6", b, basic("admin", "admin-pass"))).status).toBe(204);
  });

  it("http_basic conductors sharing a database without a cluster secret refuse to start", async () => {
    const auth = { auth_strategy: "http_basic" as const, http_basic_auth_user_file: files.userFile };
    await expect(startConductor({ name: "tr-nosecret", databasePath: database, auth })).rejects.toThrow(
      /needs cluster.secret_file/,
    );
  });

  it("without a secret file, conductors sign with the database's key: a client's bare forwarding mark is refused", async () => {
    // noauth on one SQLite file: before, `x-anvil-forwarded-by` alone made any conductor serve a call meant
    // for the owner; now every forwarded call carries a MAC under a key only the conductors hold
    const databasePath = join(dir, "noauth.sqlite");
    const config = (name: string) => ({
      name,
      databasePath,
      cluster: { heartbeatIntervalS: 0.3, deadAfterS: 30 },
    });
    const n1 = await startConductor(config("tr-n1"), { logger: silentLogger });
    const n2 = await startConductor(config("tr-n2"), { logger: silentLogger });
    try {
      await waitFor(() => clusterFormed([n1, n2]), {
        what: "both noauth conductors to see each other",
      });
      const ring = new HashRing(["tr-n1", "tr-n2"]);
      let uuid = randomUUID();
      while (ring.lookup(uuid, 1)[0] !== "tr-n2") uuid = randomUUID();
      expect(
        (
          await call("127.0.0.1", `${n1.url}/v1/nodes`, {
            method: "POST",
            body: { uuid, driver: "fake-hardware" },
          })
        ).status,
      ).toBe(201);
      const url = (via: Ctx) => `${via.url}/v1/nodes/${uuid}/management/boot_device`;
      const put = { method: "PUT", body: { boot_device: "pxe" } };
      // a client's own mark: refused at the non-owner and at the owner alike
      for (const via of [n1, n2])
        expect(
          (await call("127.0.0.8", url(via), { ...put, headers: { "x-anvil-forwarded-by": "tr-n1" } }))
            .status,
        ).toBe(401);
      // a plain call through the non-owner is forwarded, signed with the shared key, and runs on the owner
      expect((await call("127.0.0.8", url(n1), put)).status).toBe(204);
      // it ran on the owner (fake management keeps the device in the owner's memory), for the real client
      expect((await call("127.0.0.1", url(n2))).body).toMatchObject({ boot_device: "pxe" });
      const history = await n2.conductor.store.listNodeHistory(uuid, {});
      expect(history.filter((e) => e.event_type === "boot_device").map((e) => e.remote_address)).toContain(
        "127.0.0.8",
      );
      // both read one key from the database (what one signs, the other verifies)
      const key = (c: Ctx) => c.conductor.store.sharedSecret("cluster-peers", "unused");
      expect(await key(n1)).toBe(await key(n2));
    } finally {
      await n2.stop();
      await n1.stop();
    }
  });
});
