import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { api, provisionThrough, spawnConductor, waitForState } from "../helpers/conductor.ts";
import {
  ensureAgentBuilt,
  sampleInventory,
  startAgentProcess,
  writeSimulatedMachine,
  type AgentProcess,
} from "../helpers/agent.ts";

const MAC = "52:54:00:77:00:01";

/** The conductor dies while a node waits for its agent; after a restart the inspection still completes. */
describe("a conductor killed during inspection", () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-inspect-restart-"));
  const args = ["--db", join(dir, "anvil.sqlite"), "--data-dir", dir, "--power-sync-interval", "0"];
  const stops: (() => unknown)[] = [];
  afterAll(async () => {
    for (const stop of stops.reverse()) await stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the agent reconnects to the new conductor and the node reaches manageable", async () => {
    const executable = await ensureAgentBuilt();
    const first = await spawnConductor(args);
    stops.push(() => first.child.kill("SIGKILL"));
    const port = new URL(first.url).port;
    const created = await api(`${first.url}/v1/nodes`, {
      method: "POST",
      body: { name: "ir", driver: "fake-hardware", inspect_interface: "agent" },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const uuid = (created.body as { uuid: string }).uuid;
    const nic = await api(`${first.url}/v1/ports`, {
      method: "POST",
      body: { node_uuid: uuid, address: MAC },
    });
    expect(nic.status, JSON.stringify(nic.body)).toBe(201);
    await provisionThrough(first.url, "ir", [
      ["manage", "manageable"],
      ["inspect", "inspect wait"],
    ]);

    first.child.kill("SIGKILL");
    await new Promise((resolve) => first.child.once("exit", resolve));

    // the node's ramdisk comes up while no conductor answers: the agent keeps dialling with backoff
    const machine = await writeSimulatedMachine(dir, sampleInventory({ macs: [MAC] }));
    const agent: AgentProcess = startAgentProcess({
      executable,
      args: [
        "service",
        "--conductor",
        `ws://127.0.0.1:${port}/v1/agent`,
        "--backend",
        "simulated",
        "--inventory",
        machine,
      ],
    });
    stops.push(() => agent.stop());
    await new Promise((resolve) => setTimeout(resolve, 1500));

    const second = await spawnConductor([...args, "--port", port]);
    stops.push(() => second.child.kill("SIGKILL"));
    const node = await waitForState(second.url, "ir", "manageable");
    expect(node.last_error).toBeNull();
    expect(node.reservation).toBeNull();
    expect((node.properties as Record<string, unknown>).cpus).toBe(8);
    // two conductor starts (30 s each at most) and waits: room for waitForState's 60 s to name the state
  }, 180_000);
});
