import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { burninCpu } from "../../agent/commands/burnin-cpu.ts";
import { burninDisk } from "../../agent/commands/burnin-disk.ts";
import { burninMemory } from "../../agent/commands/burnin-memory.ts";
import { runBadblocks } from "../../agent/commands/badblocks.ts";
import type { CommandContext } from "../../agent/commands/command.ts";
import { LinuxBurninTools } from "../../agent/hardware/burnin-tools.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { simulatedInventory } from "../../agent/hardware/simulated/sample-inventory.ts";
import type { StressResult } from "../../shared/burnin.ts";
import { silentLogger } from "../../shared/log.ts";
import { exec } from "../../shared/system/exec.ts";

/** The burn-in commands with Debian's real stress-ng and fio, on a loop device (root only). */
describe.runIf(process.getuid?.() === 0)("burn-in with the real tools on a loop device", () => {
  let dir = "";
  let loop = "";

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-burnin-loop-"));
    const file = join(dir, "disk.img");
    expect((await exec("truncate", ["-s", "64M", file])).code).toBe(0);
    const attached = await exec("losetup", ["--find", "--show", file]);
    expect(attached.code, attached.stderr).toBe(0);
    loop = attached.stdout.trim();
  });
  afterAll(async () => {
    if (loop) await exec("losetup", ["--detach", loop]);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  function context(): CommandContext {
    const backend = new SimulatedBackend({
      inventory: simulatedInventory({
        macs: ["52:54:00:aa:bb:03"],
        disks: [{ name: loop, size: 64 << 20, serial: "LOOP" }],
      }),
    });
    Object.defineProperty(backend, "burnin", { value: new LinuxBurninTools() });
    return {
      backend,
      signal: new AbortController().signal,
      logger: silentLogger,
      progress: () => undefined,
      afterResult: () => undefined,
    };
  }

  it("burnin_disk: fio writes and verifies the loop device and reports its MB/s", async () => {
    const result = (await burninDisk({ loops: 1, runtime: 2 }, context())) as {
      devices: { name: string; read_mb_s: number; write_mb_s: number; total_errors: number; error: number }[];
    };
    expect(result.devices).toHaveLength(1);
    const [disk] = result.devices;
    expect(disk).toMatchObject({ name: loop, error: 0, total_errors: 0 });
    expect(disk!.read_mb_s).toBeGreaterThan(0);
    expect(disk!.write_mb_s).toBeGreaterThan(0);
    console.log(`burnin_disk on ${loop}: read ${disk!.read_mb_s} MB/s, write ${disk!.write_mb_s} MB/s`);
  }, 120_000);

  it("burnin_disk without fio: badblocks writes, reads back and compares every block, a pattern per loop", async () => {
    const result = await runBadblocks({ devices: [loop], loops: 2, runtime: 0 }, context());
    expect(result).toMatchObject({ tool: "badblocks", patterns: ["0xaa", "0x55"] });
    const [disk] = result.devices;
    // two whole passes over the 64 MiB device, each direction
    expect(disk).toMatchObject({
      name: loop,
      write_bytes: 2 * (64 << 20),
      read_bytes: 2 * (64 << 20),
      total_errors: 0,
    });
    console.log(
      `burnin_disk (badblocks) on ${loop}: read ${disk!.read_mb_s} MB/s, write ${disk!.write_mb_s} MB/s`,
    );
  }, 120_000);

  it("burnin_disk without fio, with a runtime: badblocks is interrupted and reports the blocks it reached", async () => {
    // 1000 passes over 64 MiB are far more than a second's work: the runtime stops it
    const result = await runBadblocks({ devices: [loop], loops: 1000, runtime: 1 }, context());
    const [disk] = result.devices;
    expect(disk!.total_errors).toBe(0);
    expect(disk!.write_bytes).toBeGreaterThan(0);
    expect(disk!.write_bytes).toBeLessThan(1000 * (64 << 20));
    // writes lead reads by at most one pass
    expect(disk!.write_bytes - disk!.read_bytes).toBeLessThanOrEqual(64 << 20);
    expect(disk!.write_bytes).toBeGreaterThanOrEqual(disk!.read_bytes);
  }, 120_000);

  it("burnin_cpu and burnin_memory: stress-ng for 2 s each, with their bogo ops", async () => {
    const cpu = (await burninCpu({ timeout: 2, cpu: 1 }, context())) as StressResult;
    const vm = (await burninMemory({ timeout: 2, vm: 1, vm_bytes: "32m" }, context())) as StressResult;
    for (const result of [cpu, vm]) expect(result.metrics[0]!.bogo_ops).toBeGreaterThan(0);
    console.log(
      `burnin_cpu: ${cpu.metrics[0]!.bogo_ops} bogo ops; burnin_memory: ${vm.metrics[0]!.bogo_ops} bogo ops`,
    );
  }, 120_000);

  it("burnin_disk fails naming fio's complaint when the device is gone", async () => {
    const ctx = context();
    const gone = `${dir}/missing`;
    Object.defineProperty(ctx.backend, "disks", { value: async () => [{ name: gone }] });
    await expect(burninDisk({ loops: 1, runtime: 1 }, ctx)).rejects.toMatchObject({
      code: "COMMAND_FAILED",
      message: expect.stringMatching(/^burnin_disk: fio /) as unknown,
    });
  }, 60_000);
});
