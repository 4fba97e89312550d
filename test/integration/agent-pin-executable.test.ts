import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgentGateway } from "../../conductor/agents/gateway.ts";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { makeLabCa, type LabCa } from "../../conductor/tls/lab-ca.ts";
import { loadTlsMaterial } from "../../conductor/tls/material.ts";
import { silentLogger } from "../../shared/log.ts";
import {
  ROOT,
  ensureAgentBuilt,
  sampleInventory,
  startAgentProcess,
  writeSimulatedMachine,
} from "../helpers/agent.ts";
import { waitFor } from "../helpers/wait.ts";

// test/integration/tls.test.ts checks the pin with the agent's link in process; this runs the built
// single executable (what the ramdisk runs) with the pin as the ramdisk's command line gives it.
const NODE = "77777777-7777-4777-8777-777777777777";
const MAC = "52:54:00:77:77:77";
let dir: string;
let executable: string;
let lab: LabCa;
let other: LabCa;

beforeAll(async () => {
  dir = await mkdtemp(join(ROOT, ".tmp/agent-pin-"));
  [executable, lab, other] = await Promise.all([
    ensureAgentBuilt(),
    makeLabCa({ dir: join(dir, "lab"), names: ["127.0.0.1"] }),
    makeLabCa({ dir: join(dir, "other"), names: ["127.0.0.1"] }),
  ]);
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

const agentArgs = async (url: string, pin: string) => [
  ...["service", "--conductor", url, "--ca-fingerprint", pin, "--log-level", "debug"],
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
  }, 60_000);

  it("refuses a conductor presenting a certificate from another CA: it dials, but never upgrades or says hello", async () => {
    const conductor = await conductorServing(other);
    const agent = startAgentProcess({ executable, args: await agentArgs(conductor.url, lab.caFingerprint) });
    try {
      // it keeps redialling: wait for two refusals, so one is not a fluke of timing
      await waitFor(() => (agent.stderr().match(/does not match the pinned SHA-256/g) ?? []).length >= 2, {
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
  }, 60_000);
});
