import { execFile } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Agent, fetch as undiciFetch } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COMMANDS } from "../../agent/commands/registry.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { AgentLink } from "../../agent/link/client.ts";
import { caFingerprintOf } from "../../agent/cmdline.ts";
import type { FakeBoot } from "../../conductor/drivers/boot/fake.ts";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { createAgentGateway } from "../../conductor/agents/gateway.ts";
import { runCli } from "../../conductor/cli/cli.ts";
import { makeLabCa, type LabCa } from "../../conductor/tls/lab-ca.ts";
import { loadTlsMaterial } from "../../conductor/tls/material.ts";
import { silentLogger } from "../../shared/log.ts";
import { basic, writeUserFiles } from "../helpers/auth.ts";
import { startConductor } from "../helpers/conductor.ts";
import { baremetal } from "../../scripts/lab/baremetal.ts";
import { recordingLogger, sampleInventory } from "../helpers/agent.ts";
import { waitFor } from "../helpers/wait.ts";

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), "anvil-tls-"));
let lab: LabCa;
let other: LabCa;

beforeAll(async () => {
  let out = "";
  const code = await runCli(["tls", "make-lab-ca", "--dir", join(dir, "lab"), "127.0.0.1", "localhost"], {
    env: {},
    stdout: { write: (s: string) => ((out += s), true) },
    stderr: { write: () => true },
  });
  expect(code).toBe(0);
  lab = {
    caCert: join(dir, "lab/ca.crt"),
    caKey: join(dir, "lab/ca.key"),
    cert: join(dir, "lab/tls.crt"),
    key: join(dir, "lab/tls.key"),
    caFingerprint: /CA sha256\s+([0-9a-f]{64})/.exec(out)?.[1] ?? "",
  };
  other = await makeLabCa({ dir: join(dir, "other"), names: ["127.0.0.1"] });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("anvil tls make-lab-ca", () => {
  it("makes a CA and a server certificate it signed, keys private, and prints openssl's fingerprint", async () => {
    const { stdout } = await run("openssl", ["verify", "-CAfile", lab.caCert, lab.cert]);
    expect(stdout).toContain(": OK");
    const { stdout: fp } = await run("openssl", [
      "x509",
      "-in",
      lab.caCert,
      "-noout",
      "-fingerprint",
      "-sha256",
    ]);
    expect(fp.split("=")[1]!.trim().replace(/:/g, "").toLowerCase()).toBe(lab.caFingerprint);
    expect(statSync(lab.key).mode & 0o077).toBe(0);
    expect(statSync(lab.caKey).mode & 0o077).toBe(0);
    const { stdout: text } = await run("openssl", [
      "x509",
      "-in",
      lab.cert,
      "-noout",
      "-ext",
      "subjectAltName",
    ]);
    expect(text).toContain("IP Address:127.0.0.1");
  });
});

describe("the API over HTTPS with http_basic", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  beforeAll(async () => {
    const files = writeUserFiles(dir, [{ name: "ops", password: "ops-pass", role: "admin" }]);
    ctx = await startConductor({
      auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile },
      tls: { cert: lab.cert, key: lab.key, ca: lab.caCert },
    });
  });
  afterAll(() => ctx.stop());

  it("listens on https; a client that trusts the lab CA gets in, one that does not is refused", async () => {
    expect(ctx.url).toMatch(/^https:\/\//);
    const trusting = new Agent({ connect: { ca: readFileSync(lab.caCert, "utf8") } });
    const ok = await undiciFetch(`${ctx.url}/v1/nodes`, {
      dispatcher: trusting,
      headers: basic("ops", "ops-pass"),
    });
    expect(ok.status).toBe(200);
    await expect(fetch(`${ctx.url}/v1/nodes`)).rejects.toThrow();
    const plain = ctx.url.replace(/^https/, "http");
    await expect(fetch(`${plain}/v1/nodes`, { headers: basic("ops", "ops-pass") })).rejects.toThrow();
    await trusting.close();
  });

  it("the stock baremetal CLI with --os-cacert and http_basic", async () => {
    const stdout = await baremetal(ctx.url, {
      username: "ops",
      password: "ops-pass",
      caCert: lab.caCert,
    }).run(["driver", "list", "-f", "value"], { timeoutMs: 60_000 });
    expect(stdout).toContain("fake-hardware");
  });
});

describe("the agent link over WSS pins the conductor's CA", () => {
  const NODE = "55555555-5555-4555-8555-555555555555";
  const MAC = "52:54:00:55:55:55";

  async function wssGateway(served: { cert: string; key: string; ca?: string } = { ...lab, ca: lab.caCert }) {
    const directory = new MemoryAgentDirectory();
    directory.addNode({ uuid: NODE, macs: [MAC] });
    const gateway = createAgentGateway({ directory, logger: silentLogger, heartbeatTimeoutMs: 30_000 });
    const material = loadTlsMaterial(served)!;
    const server = createServer({ cert: material.cert, key: material.key }, (_q, res) =>
      res.writeHead(404).end(),
    );
    gateway.attach(server);
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const url = `wss://127.0.0.1:${(server.address() as AddressInfo).port}/v1/agent`;
    return {
      gateway,
      url,
      close: async () => {
        await gateway.close();
        server.closeAllConnections();
        await new Promise<void>((done) => server.close(() => done()));
      },
    };
  }

  const link = (url: string, pin: string, logger = silentLogger) =>
    new AgentLink({
      url,
      backend: new SimulatedBackend({ inventory: sampleInventory({ macs: [MAC] }) }),
      commands: COMMANDS,
      logger,
      agentVersion: "test",
      backoff: { initialMs: 50, maxMs: 200 },
      pinnedFingerprint: pin,
    });

  it("connects when the chain holds the pinned CA", async () => {
    const gw = await wssGateway();
    const agent = link(gw.url, lab.caFingerprint);
    agent.start();
    try {
      await waitFor(() => gw.gateway.isConnected(NODE), { what: "pinned agent connects" });
    } finally {
      await agent.stop();
      await gw.close();
    }
  });

  it("refuses a conductor presenting another certificate: no hello (so no token) ever reaches it", async () => {
    const gw = await wssGateway();
    const lines: string[] = [];
    const agent = link(gw.url, other.caFingerprint, recordingLogger(lines));
    agent.start();
    try {
      await waitFor(() => lines.some((l) => l.includes("does not match the pinned SHA-256")), {
        what: "pin refusal logged",
      });
      expect(gw.gateway.isConnected(NODE)).toBe(false);
    } finally {
      await agent.stop();
      await gw.close();
    }
  });

  it("refuses an impostor that appends the (public) pinned CA certificate to its own chain", async () => {
    // the impostor's certificate comes from another CA; it serves our CA's certificate after it
    const gw = await wssGateway({ cert: other.cert, key: other.key, ca: lab.caCert });
    const lines: string[] = [];
    const agent = link(gw.url, lab.caFingerprint, recordingLogger(lines));
    agent.start();
    try {
      await waitFor(() => lines.some((l) => l.includes("does not match the pinned SHA-256")), {
        what: "pin refusal logged",
      });
      expect(gw.gateway.isConnected(NODE)).toBe(false);
    } finally {
      await agent.stop();
      await gw.close();
    }
  });
});

describe("a TLS conductor tells its ramdisk what to pin", () => {
  it("writes anvil.ca_fingerprint beside a wss:// anvil.conductor, and an agent using them connects", async () => {
    const ctx = await startConductor({ tls: { cert: lab.cert, key: lab.key, ca: lab.caCert } });
    const trusting = new Agent({ connect: { ca: readFileSync(lab.caCert, "utf8") } });
    const call = async (path: string, method = "GET", body?: unknown) => {
      const r = await undiciFetch(`${ctx.url}${path}`, {
        method,
        dispatcher: trusting,
        headers: { "Content-Type": "application/json", "X-OpenStack-Ironic-API-Version": "1.78" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await r.text();
      return { status: r.status, body: (text ? JSON.parse(text) : null) as Record<string, unknown> };
    };
    const MAC = "52:54:00:66:66:66";
    let agent: AgentLink | undefined;
    try {
      const node = await call("/v1/nodes", "POST", {
        driver: "fake-hardware",
        name: "tls1",
        inspect_interface: "agent",
      });
      expect(node.status).toBe(201);
      const uuid = String(node.body.uuid);
      expect((await call("/v1/ports", "POST", { node_uuid: uuid, address: MAC })).status).toBe(201);
      // each verb's 202 read; manageable and released awaited with a deadline (the loop gave it 5 s, then went on)
      const manage = await call(`/v1/nodes/${uuid}/states/provision`, "PUT", { target: "manage" });
      expect(manage.status, JSON.stringify(manage.body)).toBe(202);
      await waitFor(
        async () => {
          const shown = (await call(`/v1/nodes/${uuid}`)).body;
          return shown.provision_state === "manageable" && shown.reservation === null;
        },
        { what: "manageable and released" },
      );
      const inspect = await call(`/v1/nodes/${uuid}/states/provision`, "PUT", { target: "inspect" });
      expect(inspect.status, JSON.stringify(inspect.body)).toBe(202);
      const fakeBoot = ctx.conductor.drivers.get("fake-hardware")?.boot as FakeBoot;
      await waitFor(() => fakeBoot.stateOf(uuid)?.kind === "ramdisk", { what: "ramdisk prepared" });
      const params = (fakeBoot.stateOf(uuid) as { agentParams: Record<string, string> }).agentParams;
      expect(params).toEqual({
        "anvil.conductor": `${ctx.url.replace(/^https/, "wss")}/v1/agent`,
        "anvil.ca_fingerprint": lab.caFingerprint,
      });
      agent = new AgentLink({
        url: params["anvil.conductor"]!,
        pinnedFingerprint: caFingerprintOf(new Map(Object.entries(params))),
        backend: new SimulatedBackend({ inventory: sampleInventory({ macs: [MAC] }) }),
        commands: COMMANDS,
        logger: silentLogger,
        agentVersion: "test",
        backoff: { initialMs: 50, maxMs: 200 },
      });
      agent.start();
      await waitFor(() => ctx.conductor.gateway.isConnected(uuid), { what: "agent over wss" });
    } finally {
      await agent?.stop();
      await trusting.close();
      await ctx.stop();
    }
  });
});
