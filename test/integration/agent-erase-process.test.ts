import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { simulatedInventory } from "../../agent/hardware/simulated/sample-inventory.ts";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { silentLogger } from "../../shared/log.ts";
import type { Progress } from "../../shared/protocol.ts";
import {
  ROOT,
  ensureAgentBuilt,
  startAgentProcess,
  startGatewayServer,
  writeSimulatedMachine,
} from "../helpers/agent.ts";
import { waitFor } from "../helpers/wait.ts";
import type { AgentProcess, GatewayServer } from "../helpers/agent.ts";

const NODE = "13131313-1313-4313-8313-131313131313";
const MAC = "52:54:00:13:13:13";
const MiB = 1024 * 1024;
const SIZES = [24 * MiB, 40 * MiB];

/** The built agent executable erasing a simulated machine's two disks (files) in parallel. */
describe("erase_devices in the agent executable", () => {
  let dir: string;
  let disks: string[];
  let agent: AgentProcess | undefined;
  let gw: GatewayServer;

  beforeAll(async () => {
    const executable = await ensureAgentBuilt();
    await mkdir(join(ROOT, ".tmp"), { recursive: true });
    dir = await mkdtemp(join(ROOT, ".tmp/agent-erase-"));
    disks = SIZES.map((_, index) => join(dir, `disk${index}.img`));
    const inventory = simulatedInventory({
      macs: [MAC],
      disks: disks.map((name, index) => ({ name, size: SIZES[index] ?? 0, serial: `ERASE-${index}` })),
    });
    const directory = new MemoryAgentDirectory();
    directory.addNode({ uuid: NODE, macs: [MAC] });
    gw = await startGatewayServer({ directory, logger: silentLogger });
    const machine = await writeSimulatedMachine(dir, inventory);
    agent = startAgentProcess({
      executable,
      args: ["service", "--conductor", gw.url, "--backend", "simulated", "--inventory", machine],
    });
    await waitFor(() => gw.gateway.isConnected(NODE), { what: "the agent to connect" });
  }, 300_000);

  afterAll(async () => {
    await agent?.stop();
    await gw?.gateway.close();
    await gw?.kill();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function fill(): Promise<void> {
    await Promise.all(disks.map((disk, index) => writeFile(disk, randomBytes(SIZES[index] ?? 0))));
  }

  it("overwrites both disks in parallel, with progress frames for each, and verifies them", async () => {
    await fill();
    const progress: Progress[] = [];
    const result = (await gw.gateway.call(
      NODE,
      { name: "erase_devices", args: { enable_discard: false } },
      { onProgress: (p) => progress.push(p) },
    )) as { devices: Array<Record<string, unknown>> };
    expect(result.devices).toMatchObject(
      disks.map((device, index) => ({
        device,
        method: "overwrite",
        verified: true,
        bytes: SIZES[index],
        skipped: null,
      })),
    );
    for (const disk of disks) expect((await readFile(disk)).every((b) => b === 0)).toBe(true);
    for (const [index, disk] of disks.entries()) {
      const total = 2 * (SIZES[index] ?? 0);
      expect(progress).toContainEqual(
        expect.objectContaining({ step: `erase_devices ${disk}`, bytes_done: total, bytes_total: total }),
      );
    }
    // Both disks were under way before either finished.
    const firstDone = progress.findIndex((p) => p.bytes_done !== undefined && p.bytes_done === p.bytes_total);
    const startedBefore = new Set(
      progress
        .slice(0, firstDone)
        .filter((p) => p.message === "overwrite started")
        .map((p) => p.step),
    );
    expect(startedBefore.size).toBe(2);
  });

  it("express erases by discard (a punched hole) and lists each disk", async () => {
    await fill();
    const result = (await gw.gateway.call(NODE, { name: "erase_devices", args: { express: true } })) as {
      devices: Array<Record<string, unknown>>;
    };
    expect(result.devices.map((d) => [d.device, d.method, d.verified])).toEqual(
      disks.map((device) => [device, "discard", true]),
    );
    for (const disk of disks) expect((await readFile(disk)).every((b) => b === 0)).toBe(true);
  });

  it("erase_devices_metadata leaves the disk listed in skip_block_devices alone", async () => {
    await fill();
    const before = await readFile(disks[1] ?? "");
    const result = (await gw.gateway.call(NODE, {
      name: "erase_devices_metadata",
      args: { skip_block_devices: [{ serial: "ERASE-1" }] },
    })) as { devices: Array<Record<string, unknown>> };
    expect(result.devices).toMatchObject([
      { device: disks[0], method: "metadata", verified: true, bytes: 2 * MiB },
      { device: disks[1], method: null, skipped: "listed in the node's skip_block_devices" },
    ]);
    expect((await readFile(disks[1] ?? "")).equals(before)).toBe(true);
  });
});
