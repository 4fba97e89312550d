import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, fetch as undiciFetch } from "undici";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { HashRing } from "../../conductor/cluster/hash-ring.ts";
import { makeLabCa } from "../../conductor/tls/lab-ca.ts";
import { silentLogger } from "../../shared/log.ts";
import { recordingLogger } from "../helpers/agent.ts";
import { waitFor } from "../helpers/wait.ts";
import { api, clusterFormed, faultOf, startConductor } from "../helpers/conductor.ts";

type Ctx = Awaited<ReturnType<typeof startConductor>>;

const dir = mkdtempSync(join(tmpdir(), "anvil-forward-"));
const running: Ctx[] = [];
afterEach(async () => {
  for (const ctx of running.splice(0).reverse()) await ctx.stop().catch(() => undefined);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Two conductors on one SQLite file (both over TLS when given); `b` records its log. */
async function pair(tls?: { cert: string; key: string; ca: string }) {
  const databasePath = join(dir, `${randomUUID()}.sqlite`);
  const bLog = recordingLogger();
  // a loaded CI machine can starve a heartbeat for seconds: no test here wants a member declared dead
  const cluster = { heartbeatIntervalS: 0.3, deadAfterS: 30 };
  const start = (name: string, logger = silentLogger) =>
    startConductor({ name, databasePath, cluster, ...(tls ? { tls } : {}) }, { logger });
  const a = await start("fw-a");
  running.push(a);
  const b = await start("fw-b", bLog);
  running.push(b);
  await waitFor(() => clusterFormed([a, b]), {
    what: "both conductors to see each other",
  });
  return { a, b, bLog };
}

/** A fake-hardware node (created through `url`) that the ring gives to `owner`. */
async function nodeOwnedBy(url: string, owner: string): Promise<string> {
  const ring = new HashRing(["fw-a", "fw-b"]);
  let uuid = randomUUID();
  while (ring.lookup(uuid, 1)[0] !== owner) uuid = randomUUID();
  const created = await api(`${url}/v1/nodes`, { method: "POST", body: { uuid, driver: "fake-hardware" } });
  expect(created.status).toBe(201);
  return uuid;
}

describe("forwarding node actions to the node's owner", () => {
  it("runs a call sent to a non-owner on the owner, over connections the non-owner keeps", async () => {
    const { a, b } = await pair();
    const uuid = await nodeOwnedBy(a.url, "fw-b");
    let ownerConnections = 0;
    b.conductor.app.server.on("connection", () => ownerConnections++);

    for (let i = 0; i < 20; i++) {
      const put = await api(`${a.url}/v1/nodes/${uuid}/management/boot_device`, {
        method: "PUT",
        body: { boot_device: i % 2 ? "disk" : "pxe", persistent: true },
      });
      expect(put.status).toBe(204);
    }
    // fake management keeps the device in the memory of the conductor that set it: the owner's
    const atOwner = await api(`${b.url}/v1/nodes/${uuid}/management/boot_device`);
    expect(atOwner.body).toEqual({ boot_device: "disk", persistent: true });
    const atNonOwner = await api(`${a.url}/v1/nodes/${uuid}/management/boot_device`, {
      headers: { "X-Anvil-Forwarded-By": "test" }, // served where it lands
    });
    expect((atNonOwner.body as { boot_device: string | null }).boot_device).not.toBe("disk");
    // 20 sequential forwarded calls share one kept-alive connection (a new one each would be 20)
    expect(ownerConnections).toBeLessThanOrEqual(2);
    expect(ownerConnections).toBeGreaterThanOrEqual(1);
  });

  it("runs updates, maintenance and deletion on the owner too: every node write under the owner's lock", async () => {
    const { a, b } = await pair();
    const uuid = await nodeOwnedBy(a.url, "fw-b");
    let ownerRequests = 0;
    b.conductor.app.server.on("request", () => ownerRequests++);
    const patched = await api(`${a.url}/v1/nodes/${uuid}`, {
      method: "PATCH",
      body: [{ op: "add", path: "/extra/where", value: "owner" }],
    });
    expect(patched.status).toBe(200);
    expect(ownerRequests).toBe(1);
    const maintenance = await api(`${a.url}/v1/nodes/${uuid}/maintenance`, {
      method: "PUT",
      body: { reason: "forwarded" },
    });
    expect(maintenance.status).toBe(202);
    expect(ownerRequests).toBe(2);
    const deleted = await api(`${a.url}/v1/nodes/${uuid}`, { method: "DELETE" });
    expect(deleted.status).toBe(204);
    expect(ownerRequests).toBe(3);
    expect((await api(`${b.url}/v1/nodes/${uuid}`)).status).toBe(404);
  });

  it("relays the owner's refusal unchanged: status, Ironic's error envelope, version headers", async () => {
    const { a, bLog } = await pair();
    const uuid = await nodeOwnedBy(a.url, "fw-b");
    const refused = await api(`${a.url}/v1/nodes/${uuid}/management/boot_device`, {
      method: "PUT",
      body: { boot_device: "floppy" },
    });
    expect(refused.status).toBe(400);
    expect(faultOf(refused.body)).toMatch(/floppy|boot_device/);
    expect(refused.headers.get("x-openstack-ironic-api-version")).toBe("1.78");
    expect(refused.headers.get("content-type")).toMatch(/application\/json/);
    // the refusal was the owner's
    expect(bLog.lines.some((l) => l.includes("request refused") && l.includes(uuid))).toBe(true);
  });

  it("forwards a request sent with Expect: 100-continue (as curl sends large bodies) instead of serving it here", async () => {
    const { a, b } = await pair();
    const uuid = await nodeOwnedBy(a.url, "fw-b");
    const body = JSON.stringify({ boot_device: "disk", persistent: true });
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(`${a.url}/v1/nodes/${uuid}/management/boot_device`, {
        method: "PUT",
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          expect: "100-continue",
        },
      });
      req.on("continue", () => req.end(body));
      req.on("response", (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
    });
    expect(status).toBe(204);
    const atOwner = await api(`${b.url}/v1/nodes/${uuid}/management/boot_device`);
    expect(atOwner.body).toEqual({ boot_device: "disk", persistent: true });
  });

  it("forwards between conductors serving HTTPS with certificates from a private CA", async () => {
    const ca = await makeLabCa({ dir: join(dir, `ca-${randomUUID()}`), names: ["127.0.0.1"] });
    const { a, b } = await pair({ cert: ca.cert, key: ca.key, ca: ca.caCert });
    expect(a.url).toMatch(/^https:/);
    const client = new Agent({ connect: { ca: readFileSync(ca.caCert, "utf8") } });
    const call = (
      url: string,
      init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
    ) =>
      undiciFetch(url, {
        dispatcher: client,
        method: init.method ?? "GET",
        headers: { "content-type": "application/json", ...init.headers },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
      });
    try {
      const ring = new HashRing(["fw-a", "fw-b"]);
      let uuid = randomUUID();
      while (ring.lookup(uuid, 1)[0] !== "fw-b") uuid = randomUUID();
      const created = await call(`${a.url}/v1/nodes`, {
        method: "POST",
        body: { uuid, driver: "fake-hardware" },
      });
      expect(created.status).toBe(201);
      const put = await call(`${a.url}/v1/nodes/${uuid}/management/boot_device`, {
        method: "PUT",
        body: { boot_device: "disk", persistent: true },
      });
      expect(put.status).toBe(204);
      // it ran on the owner: fake management remembers the device in the conductor that set it
      const atOwner = await call(`${b.url}/v1/nodes/${uuid}/management/boot_device`);
      expect(await atOwner.json()).toEqual({ boot_device: "disk", persistent: true });
    } finally {
      await client.close();
    }
  });

  it("answers 502 when an owner's answer passes the bound, without reading the rest", async () => {
    const a = await startConductor({
      name: "fw-a",
      databasePath: join(dir, `${randomUUID()}.sqlite`),
      cluster: { heartbeatIntervalS: 0.3, deadAfterS: 30 },
    });
    running.push(a);
    // a peer gone wrong: registered and heartbeating like a conductor, answering with endless bytes
    let sent = 0;
    const rogue = createServer((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      const chunk = Buffer.alloc(1024 * 1024, 0x20);
      const more = (): void => {
        while (sent < 64 * 1024 * 1024 && !response.destroyed) {
          sent += chunk.length;
          if (!response.write(chunk)) return void response.once("drain", more);
        }
        response.end();
      };
      more();
    });
    await new Promise<void>((done) => rogue.listen(0, "127.0.0.1", done));
    const identity = `fw-rogue/${randomUUID().slice(0, 8)}`;
    const { port } = rogue.address() as AddressInfo;
    await a.conductor.store.registerConductor(
      {
        identity,
        hostname: "fw-rogue",
        conductor_group: "",
        drivers: ["fake-hardware"],
        url: `http://127.0.0.1:${port}`,
        machine: "test",
        pid: 1,
        created_at: new Date().toISOString(),
        heartbeat_at: Date.now(),
        online: true,
      },
      { staleBefore: 0, retire: [] },
    );
    const beat = setInterval(() => void a.conductor.store.touchConductor(identity, Date.now()), 200);
    try {
      await waitFor(() => a.conductor.membership.alive().length === 2, {
        what: "the rogue peer to be a member",
      });
      const ring = new HashRing(["fw-a", "fw-rogue"]);
      let uuid = randomUUID();
      while (ring.lookup(uuid, 1)[0] !== "fw-rogue") uuid = randomUUID();
      expect(
        (await api(`${a.url}/v1/nodes`, { method: "POST", body: { uuid, driver: "fake-hardware" } })).status,
      ).toBe(201);
      const answer = await api(`${a.url}/v1/nodes/${uuid}/management/boot_device`, {
        method: "PUT",
        body: { boot_device: "disk" },
      });
      expect(answer.status).toBe(502);
      expect(faultOf(answer.body)).toMatch(/more than 8388608 bytes/);
      // reading stopped at the bound: the peer never got to send everything
      expect(sent).toBeLessThan(64 * 1024 * 1024);
    } finally {
      clearInterval(beat);
      rogue.closeAllConnections();
      await new Promise((done) => rogue.close(done));
    }
  });
});
