/**
 * Boot-to-hello of two deploy ramdisks under TCG, interleaved (A B, B A, …) so that both see the same machine:
 * QEMU boots the kernel and initramfs directly (no PXE: that part does not depend on the ramdisk's contents)
 * with a virtio NIC and disk (what every ramdisk, old or new, drives), and the clock stops when the agent's
 * `hello` frame reaches a conductor. Prints each boot, the medians and B/A. Minutes.
 * Usage: node --import tsx scripts/bench/ramdisk-boot.ts --a DIR --b DIR [--rounds 3]
 *   DIR holds anvil.kernel and anvil.initramfs (images/ramdisk/build.sh --out DIR).
 */
import { statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { exec } from "../../shared/system/exec.ts";
import { FakeConductor } from "../../test/helpers/fake-conductor.ts";
import { startQemu } from "../../test/helpers/qemu.ts";
import { waitFor } from "../../test/helpers/wait.ts";
import { median, roundOrder } from "./interleave.ts";

const MAC = "52:54:00:4a:4e:b1";
const HELLO_TIMEOUT_MS = 600_000;

/** One boot of the ramdisk in `dir` until the agent's hello; returns the milliseconds it took. */
async function bootToHello(dir: string, scratch: string): Promise<number> {
  const conductor = await FakeConductor.start();
  const disk = join(scratch, "disk.raw");
  await exec("truncate", ["-s", String(64 * 1024 * 1024), disk]);
  const started = Date.now();
  const vm = await startQemu({
    memoryMb: 512,
    nics: [{ kind: "user", mac: MAC, model: "virtio" }],
    disks: [{ path: disk, format: "raw", serial: "BENCH-DISK", bus: "virtio" }],
    boot: {
      kernel: join(dir, "anvil.kernel"),
      initrd: join(dir, "anvil.initramfs"),
      append: `console=ttyS0 anvil.conductor=ws://10.0.2.2:${conductor.port}/v1/agent BOOTIF=01-${MAC.replaceAll(":", "-")}`,
    },
  });
  try {
    await waitFor(() => conductor.frames.some((frame) => frame.type === "hello"), {
      timeoutMs: HELLO_TIMEOUT_MS,
      intervalMs: 100,
    });
    return Date.now() - started;
  } finally {
    await vm.stop();
    await conductor.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { a: { type: "string" }, b: { type: "string" }, rounds: { type: "string", default: "3" } },
  });
  if (values.a === undefined || values.b === undefined)
    throw new Error("usage: --a DIR --b DIR [--rounds N]");
  const sides = { a: values.a, b: values.b };
  const rounds = Number(values.rounds);
  const scratch = await mkdtemp(join(tmpdir(), "anvil-bench-ramdisk-"));
  const times: Record<"a" | "b", number[]> = { a: [], b: [] };
  try {
    for (let round = 0; round < rounds; round++) {
      const order = roundOrder(["a", "b"] as const, round);
      for (const side of order) {
        const ms = await bootToHello(sides[side], scratch);
        times[side].push(ms);
        console.log(`round ${round + 1} ${side}: ${(ms / 1000).toFixed(1)} s to hello`);
      }
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  for (const side of ["a", "b"] as const) {
    const size = statSync(join(sides[side], "anvil.initramfs")).size;
    const middle = median(times[side]);
    console.log(
      `${side} ${sides[side]}: initramfs ${(size / 1e6).toFixed(1)} MB, boot-to-hello median ${(middle / 1000).toFixed(1)} s`,
    );
  }
  const ratio = median(times.b) / median(times.a);
  console.log(
    `b/a boot-to-hello: ×${ratio.toFixed(2)} (per round: ${times.b.map((b, i) => (b / (times.a[i] ?? b)).toFixed(2)).join(", ")})`,
  );
}

await main();
