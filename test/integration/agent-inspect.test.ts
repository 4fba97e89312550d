import { mkdir, mkdtemp, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InventorySchema } from "../../shared/inventory.ts";
import type { Inventory } from "../../shared/inventory.ts";
import { exec } from "../../shared/system/exec.ts";
import { ROOT, ensureAgentBuilt, sampleInventory, writeSimulatedMachine } from "../helpers/agent.ts";

const LOOP_BYTES = 96 * 1024 * 1024;

describe("anvil-agent inspect (the built single executable)", () => {
  let agent: string;
  let dir: string;
  let loop: string;
  let inventory: Inventory;

  beforeAll(async () => {
    agent = await ensureAgentBuilt();
    await mkdir(join(ROOT, ".tmp"), { recursive: true });
    dir = await mkdtemp(join(ROOT, ".tmp/agent-inspect-"));
    const backing = join(dir, "disk.img");
    await writeFile(backing, "");
    await truncate(backing, LOOP_BYTES); // sparse
    const attached = await exec("losetup", ["-f", "--show", backing]);
    if (attached.code !== 0) throw new Error(`losetup failed: ${attached.stderr}`);
    loop = attached.stdout.trim();
    const run = await exec(agent, ["inspect"], { timeoutMs: 30_000 });
    if (run.code !== 0) throw new Error(`inspect exited ${run.code}: ${run.stderr}`);
    inventory = InventorySchema.parse(JSON.parse(run.stdout));
  }, 300_000);

  afterAll(async () => {
    if (loop) await exec("losetup", ["-d", loop]);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("counts the CPUs this machine has", async () => {
    const nproc = await exec("nproc", []);
    expect(inventory.cpu.count).toBe(availableParallelism());
    expect(inventory.cpu.count).toBe(Number(nproc.stdout.trim()));
    expect(inventory.cpu.architecture).toBe((await exec("uname", ["-m"])).stdout.trim());
  });

  it("reports memory as /proc/meminfo does", async () => {
    const meminfo = await readFile("/proc/meminfo", "utf8");
    const kib = Number(/^MemTotal:\s+(\d+)/m.exec(meminfo)?.[1]);
    expect(Math.abs(inventory.memory.total - kib * 1024)).toBeLessThanOrEqual(kib * 1024 * 0.01);
  });

  it("lists the loop device the test attached, with its size", () => {
    const disk = inventory.disks.find((candidate) => candidate.name === loop);
    expect(disk).toBeDefined();
    expect(disk?.size).toBe(LOOP_BYTES);
  });

  it("lists only interfaces that have a MAC", () => {
    for (const nic of inventory.interfaces) expect(nic.mac_address).toMatch(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
  });

  it("in a network namespace with only a veth pair, reports those interfaces and their MACs", async () => {
    const ns = `anvil-inspect-${process.pid}`;
    const ip = async (args: string[]): Promise<void> => {
      const result = await exec("ip", args);
      if (result.code !== 0) throw new Error(`ip ${args.join(" ")}: ${result.stderr}`);
    };
    await ip(["netns", "add", ns]);
    try {
      await ip([
        "-n",
        ns,
        "link",
        "add",
        "anv0",
        "address",
        "52:54:00:0a:0b:0c",
        "type",
        "veth",
        "peer",
        "name",
        "anv1",
      ]);
      const run = await exec("ip", ["netns", "exec", ns, agent, "inspect"]);
      expect(run.code).toBe(0);
      const nics = InventorySchema.parse(JSON.parse(run.stdout)).interfaces;
      expect(nics.map((nic) => nic.name).sort()).toEqual(["anv0", "anv1"]);
      expect(nics.find((nic) => nic.name === "anv0")?.mac_address).toBe("52:54:00:0a:0b:0c");
    } finally {
      await ip(["netns", "del", ns]);
    }
  });

  it("serves a simulated machine's inventory unchanged", async () => {
    const machine = sampleInventory({ macs: ["52:54:00:00:00:42"] });
    const file = await writeSimulatedMachine(dir, machine);
    const run = await exec(agent, ["inspect", "--backend", "simulated", "--inventory", file]);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual(machine);
  });

  it("fails clearly on a bad simulated inventory", async () => {
    const file = join(dir, "broken.json");
    await writeFile(file, JSON.stringify({ inventory: { cpu: {} } }));
    const run = await exec(agent, ["inspect", "--backend", "simulated", "--inventory", file]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/not a simulated machine/);
  });
});
