import { once } from "node:events";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocketServer } from "ws";
import { createAgentGateway } from "../../conductor/agents/gateway.ts";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { makeLabCa, type LabCa } from "../../conductor/tls/lab-ca.ts";
import { loadTlsMaterial } from "../../conductor/tls/material.ts";
import { silentLogger } from "../../shared/log.ts";
import { encodeFrame } from "../../shared/protocol.ts";
import { exec } from "../../shared/system/exec.ts";
import {
  ROOT,
  ensureAgentBuilt,
  sampleInventory,
  startAgentProcess,
  writeSimulatedMachine,
} from "../helpers/agent.ts";
import { makeImpostorChains, opensslAcceptsServer } from "../helpers/tls.ts";
import type { ImpostorKind, ServedChain } from "../helpers/tls.ts";
import { waitFor } from "../helpers/wait.ts";

// test/integration/tls.test.ts checks the pin with the agent's link in process; this runs the built
// single executable (what the ramdisk runs) with the pin as the ramdisk's command line gives it.
const NODE = "77777777-7777-4777-8777-777777777777";
const MAC = "52:54:00:77:77:77";
let dir: string;
let executable: string;
let lab: LabCa;
let other: LabCa;
let chains: Record<ImpostorKind, ServedChain>;

beforeAll(async () => {
  // .tmp is not in a fresh clone: made here, not left to whichever file happened to run first
  await mkdir(join(ROOT, ".tmp"), { recursive: true });
  dir = await mkdtemp(join(ROOT, ".tmp/agent-pin-"));
  [executable, lab, other] = await Promise.all([
    ensureAgentBuilt(),
    makeLabCa({ dir: join(dir, "lab"), names: ["127.0.0.1"] }),
    makeLabCa({ dir: join(dir, "other"), names: ["127.0.0.1"] }),
  ]);
  chains = await makeImpostorChains(dir, lab);
}, 300_000);
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A WSS agent endpoint serving `ca`'s certificate; counts TCP connections and WebSocket upgrades. */
async function conductorServing(ca: LabCa) {
  const directory = new MemoryAgentDirectory();
  directory.addNode({ uuid: NODE, macs: [MAC] });
  const gateway = createAgentGateway({ directory, logger: silentLogger, heartbeatTimeoutMs: 30_000 });
  const material = loadTlsMaterial({ cert: ca.cert, key: ca.key, ca: ca.caCert })!;
  const server = createServer({ cert: material.cert, key: material.key }, (_q, res) =>
    res.writeHead(404).end(),
  );
  const seen = { connections: 0, upgrades: 0 };
  // the agent drops the handshake before its Finished, so the server never sees "secureConnection"
  server.on("connection", () => seen.connections++);
  server.on("upgrade", () => seen.upgrades++);
  gateway.attach(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    gateway,
    seen,
    url: `wss://127.0.0.1:${(server.address() as AddressInfo).port}/v1/agent`,
    close: async () => {
      await gateway.close();
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
}

const agentArgs = async (url: string, pins: string | readonly string[]) => [
  ...["service", "--conductor", url, "--log-level", "debug"],
  ...(typeof pins === "string" ? [pins] : pins).flatMap((pin) => ["--ca-fingerprint", pin]),
  ...[
    "--backend",
    "simulated",
    "--inventory",
    await writeSimulatedMachine(dir, sampleInventory({ macs: [MAC] })),
  ],
];

describe("the agent executable pins the CA fingerprint it is given", () => {
  it("connects to a conductor whose chain leads to the pinned CA", async () => {
    const conductor = await conductorServing(lab);
    const agent = startAgentProcess({ executable, args: await agentArgs(conductor.url, lab.caFingerprint) });
    try {
      await waitFor(() => conductor.gateway.isConnected(NODE), { what: "the pinned agent to connect" });
    } finally {
      await agent.stop();
      await conductor.close();
    }
  }, 120_000);

  it("refuses a conductor presenting a certificate from another CA: it dials, but never upgrades or says hello", async () => {
    const conductor = await conductorServing(other);
    const agent = startAgentProcess({ executable, args: await agentArgs(conductor.url, lab.caFingerprint) });
    try {
      // it keeps redialling: wait for two refusals, so one is not a fluke of timing
      await waitFor(() => (agent.stderr().match(/"conductor refused"/g) ?? []).length >= 2, {
        what: "the agent to refuse the impostor twice",
        timeoutMs: 30_000,
      });
      expect(conductor.seen.connections).toBeGreaterThanOrEqual(2);
      expect(conductor.seen.upgrades).toBe(0);
      expect(conductor.gateway.isConnected(NODE)).toBe(false);
    } finally {
      const { stderr } = await agent.stop();
      expect(stderr).toContain(lab.caFingerprint);
    }
    await conductor.close();
  }, 120_000);
});

/**
 * A WebSocket endpoint that records what an agent gets to send it: TCP connections, upgrades, hello frames.
 * `chain` null serves ws:// in clear. `redirectTo` answers every hello with a redirect frame there.
 */
async function recorder(chain: ServedChain | null, redirectTo?: string) {
  const seen = { connections: 0, upgrades: 0, hellos: 0 };
  const server = chain === null ? createHttpServer() : createServer({ cert: chain.cert, key: chain.key });
  server.on("connection", () => seen.connections++);
  server.on("upgrade", () => seen.upgrades++);
  const wss = new WebSocketServer({ server });
  wss.on("connection", (socket) => {
    socket.on("message", (data) => {
      if (!/"type"\s*:\s*"hello"/.test(data.toString())) return;
      seen.hellos++;
      if (redirectTo !== undefined) {
        socket.send(encodeFrame({ type: "redirect", url: redirectTo, conductor: "elsewhere" }));
        socket.close();
      }
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  return {
    seen,
    url: `${chain === null ? "ws" : "wss"}://127.0.0.1:${port}/v1/agent`,
    close: async () => {
      for (const client of wss.clients) client.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
}

const count = (text: string, pattern: RegExp): number => (text.match(pattern) ?? []).length;

describe("the agent executable verifies the chain under its pin as OpenSSL does, before any hello", () => {
  it("the recorder hears the hello of an agent given the genuine chain (the control)", async () => {
    expect(await opensslAcceptsServer(lab, chains.genuine)).toBe(true);
    const conductor = await recorder(chains.genuine);
    const agent = startAgentProcess({ executable, args: await agentArgs(conductor.url, lab.caFingerprint) });
    try {
      await waitFor(() => conductor.seen.hellos >= 1, { what: "the hello over the genuine chain" });
    } finally {
      await agent.stop();
      await conductor.close();
    }
  }, 120_000);

  // OpenSSL checks each issuer's purpose as a CA: like `openssl verify`, it names the depth-1 certificate
  // "unsuitable certificate purpose" (INVALID_PURPOSE) when it has no CA bit
  it.each([
    [
      "a leaf the pinned CA issued without keyUsage or CA bit, used as an issuer",
      "leafIssuer",
      /INVALID_PURPOSE/,
    ],
    ["a version 1 certificate the pinned CA issued, used as an issuer", "v1Issuer", /INVALID_PURPOSE/],
    ["a certificate from the pinned CA for TLS clients only (clientAuth)", "clientOnly", /INVALID_PURPOSE/],
    ["a server certificate from the pinned CA for another host", "wrongHost", /ERR_TLS_CERT_ALTNAME_INVALID/],
  ] as const)(
    "refuses %s",
    async (_, kind, reason) => {
      // the fixture is what it says: openssl verify refuses it too
      expect(await opensslAcceptsServer(lab, chains[kind])).toBe(false);
      const conductor = await recorder(chains[kind]);
      const agent = startAgentProcess({
        executable,
        args: await agentArgs(conductor.url, lab.caFingerprint),
      });
      try {
        // it keeps redialling: wait for two refusals, so that one is not a fluke of timing
        await waitFor(() => count(agent.stderr(), /"conductor refused"/g) >= 2, {
          what: "the agent to refuse the impostor twice",
          timeoutMs: 30_000,
        });
        expect(agent.stderr()).toMatch(reason);
        expect(agent.stderr()).toContain(`does not match the pinned SHA-256 ${lab.caFingerprint}`);
        expect(conductor.seen.connections).toBeGreaterThanOrEqual(2);
        expect(conductor.seen.upgrades).toBe(0);
        expect(conductor.seen.hellos).toBe(0);
      } finally {
        await agent.stop();
        await conductor.close();
      }
    },
    60_000,
  );

  it.each([
    ["an empty pin", [""]],
    ["an empty pin after a good one", ["GOOD", ""]],
    ["two different pins", ["GOOD", "OTHER"]],
    ["a pin that is no SHA-256", ["c0ffee"]],
  ] as const)(
    "stops with %s, exit code 1, without dialling",
    async (_, pins) => {
      const conductor = await recorder(chains.genuine);
      const given = pins.map((pin) =>
        pin === "GOOD" ? lab.caFingerprint : pin === "OTHER" ? other.caFingerprint : pin,
      );
      try {
        const args = await agentArgs(conductor.url, given);
        // it must exit by itself: exec throws if it still runs after the timeout
        const { code, stderr } = await exec(executable, args, { timeoutMs: 30_000 });
        expect(code).toBe(1);
        expect(stderr).toMatch(
          /anvil\.ca_fingerprint (is empty|is given 2 times with different|is not a SHA-256)/,
        );
        expect(conductor.seen.connections).toBe(0);
      } finally {
        await conductor.close();
      }
    },
    60_000,
  );

  it("does not follow a redirect from wss:// to ws://: the clear endpoint never hears from it", async () => {
    const clear = await recorder(null);
    const conductor = await recorder(chains.genuine, clear.url);
    const agent = startAgentProcess({ executable, args: await agentArgs(conductor.url, lab.caFingerprint) });
    try {
      await waitFor(() => count(agent.stderr(), /would downgrade the link/g) >= 2, {
        what: "the agent to refuse the redirect twice",
        timeoutMs: 30_000,
      });
      expect(conductor.seen.hellos).toBeGreaterThanOrEqual(2);
      expect(clear.seen).toEqual({ connections: 0, upgrades: 0, hellos: 0 });
    } finally {
      await agent.stop();
      await conductor.close();
      await clear.close();
    }
  }, 120_000);
});
