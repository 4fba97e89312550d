/**
 * Erase benchmark in the lab's machine (not a test): the deploy ramdisk boots in QEMU (TCG) with disks shaped
 * like the lab node's — qcow2 virtio disks and NVMe disks, all with discard=unmap — including a 10 GiB thin
 * NVMe disk. In the same boot, on the same devices, a small init in front of the ramdisk's own times the
 * stock tools (`dd if=/dev/zero of=DEV bs=4M oflag=direct`, `nvme format`, `blkdiscard`), then the ramdisk
 * starts the agent as usual and the benchmark has it erase the same devices (erase_devices, one method
 * forced at a time through Ironic's options):
 *   (a) the agent's overwrite (one pass of zeros, with its verify pass) against dd          goal: >= 0.95x dd
 *   (b) the agent's discard (with its read-back) against blkdiscard, on NVMe (deallocated blocks read zeros)
 *   (c) the agent's NVMe format against `nvme format --ses=1`
 *   (d) N disks erased in parallel against the sum of erasing each alone                  goal: ~the time of one
 *   (e) discard of the 10 GiB thin device (blkdiscard and the agent)                      goal: seconds
 * Usage: node --import tsx scripts/bench/erase-lab.ts [--size-gib 1] [--disks 3] [--thin-gib 10]
 * Run it under `flock /tmp/anvil-heavy.lock` on a shared machine (it builds the agent and ramdisk if stale).
 */
import { chmod, copyFile, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { exec } from "../../shared/system/exec.ts";
import { bootRamdisk, buildRamdisk } from "../../test/helpers/ramdisk-vm.ts";
import type { QemuDisk } from "../../test/helpers/qemu.ts";
import { runOk } from "../../test/helpers/run.ts";

const ROOT = resolve(import.meta.dirname, "../..");
const DIR = join(ROOT, ".tmp/bench-erase-lab");

const { values } = parseArgs({
  options: {
    "size-gib": { type: "string", default: "1" },
    disks: { type: "string", default: "3" },
    "thin-gib": { type: "string", default: "10" },
  },
});
const SIZE_GIB = Number(values["size-gib"]);
const DISKS = Number(values.disks);
const THIN_GIB = Number(values["thin-gib"]);
if (!(SIZE_GIB > 0) || !(DISKS >= 2 && DISKS <= 8) || !(THIN_GIB > 0)) {
  throw new Error("--size-gib > 0, --disks 2..8, --thin-gib > 0");
}

/** virtio disks vda..: DISKS for overwriting (the first also for dd), one for discard, one thin. */
const overwriteDisks = Array.from({ length: DISKS }, (_, i) => `/dev/vd${String.fromCharCode(97 + i)}`);
// NOTE: discard runs on NVMe namespaces: QEMU's NVMe says deallocated blocks read zeros (DLFEAT), which
// makes a discard an erase; its virtio-blk promises nothing (and reports a rotational disk)
const nvmeDisk = "/dev/nvme0n1";
const discardDisk = "/dev/nvme1n1";
const thinDisk = "/dev/nvme2n1";

/**
 * The benchmark's init (PID 1 before the ramdisk's /init): loads the disk drivers, times the stock tools on
 * the devices the agent erases next, prints `ANVIL-BENCH name seconds rc` lines, then hands over to /init.
 */
function benchInit(): string {
  const waits = [...overwriteDisks, discardDisk, thinDisk, nvmeDisk].map((d) => d.slice(5)).join(" ");
  return `#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t devtmpfs devtmpfs /dev
mount -t proc proc /proc
mount -t sysfs sysfs /sys
exec >/dev/console 2>&1
for m in virtio_pci virtio_blk nvme; do modprobe "$m"; done
for name in ${waits}; do
  tries=0
  while [ ! -e "/sys/block/$name" ] && [ "$tries" -lt 100 ]; do sleep 0.1; tries=$((tries + 1)); done
done
now() { cut -d' ' -f1 /proc/uptime; }
timed() {
  name=$1; shift
  a=$(now); "$@" >/tmp/bench.out 2>&1; rc=$?; b=$(now)
  echo "ANVIL-BENCH $name $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", b - a}') $rc"
  sed 's/^/ANVIL-BENCH-OUT /' /tmp/bench.out
}
# exactly the device's size, so dd ends without ENOSPC
blocks=$(( $(cat /sys/block/${overwriteDisks[0]!.slice(5)}/size) / 8192 ))
timed dd dd if=/dev/zero of=${overwriteDisks[0]} bs=4M count=$blocks oflag=direct
timed nvme-format nvme format ${nvmeDisk} --ses=1 --force
timed blkdiscard blkdiscard ${discardDisk}
timed blkdiscard-thin blkdiscard ${thinDisk}
echo "ANVIL-BENCH-TOOLS-DONE"
umount /sys /proc
umount /dev
exec /init
`;
}

/** The ramdisk with the benchmark's init appended as a second (uncompressed) cpio archive. */
async function benchRamdisk(ramdisk: { kernel: string; initrd: string }): Promise<string> {
  const stage = join(DIR, "stage");
  await rm(stage, { recursive: true, force: true });
  await mkdir(join(stage, "bench"), { recursive: true });
  await writeFile(join(stage, "bench", "init"), benchInit());
  await chmod(join(stage, "bench", "init"), 0o755);
  const cpio = join(DIR, "bench.cpio");
  const listed = await exec(
    "sh",
    ["-c", `cd "${stage}" && find . -mindepth 1 | cpio -o -H newc -R 0:0 --quiet > "${cpio}"`],
    { timeoutMs: 60_000 },
  );
  if (listed.code !== 0) throw new Error(`cpio failed: ${listed.stderr}`);
  const initrd = join(DIR, "bench.initramfs");
  // NOTE: the kernel unpacks concatenated archives in order, but looks for a cpio header only at a 4-byte
  // boundary after a compressed one (zeros in between are skipped): pad the ramdisk to one
  const head = await readFile(ramdisk.initrd);
  const pad = Buffer.alloc((4 - (head.length % 4)) % 4);
  await writeFile(initrd, Buffer.concat([head, pad, await readFile(cpio)]));
  return initrd;
}

async function qcow2(name: string, sizeGib: number): Promise<string> {
  const path = join(DIR, `${name}.qcow2`);
  await runOk("qemu-img", ["create", "-q", "-f", "qcow2", path, `${sizeGib}G`], { timeoutMs: 60_000 });
  return path;
}

/** Every disk gets data first, so erasing has something to remove (a fresh qcow2 is all holes). */
async function fill(path: string, gib: number): Promise<void> {
  // qemu-io takes at most 2 GiB - 1 per request: 256 MiB writes
  const chunks = Array.from({ length: Math.ceil(gib * 4) }, (_, i) => [
    "-c",
    `write -P 0xab ${i * 256}M 256M`,
  ]);
  await runOk("qemu-io", ["-f", "qcow2", ...chunks.flat(), path], { timeoutMs: 30 * 60_000 });
}

interface EraseRun {
  wall: number;
  devices: EraseDevice[];
  error: string | null;
  /** From the method's "started" progress frame to its last bytes frame: the writing alone, no verify. */
  writeSeconds: number | null;
}

/** Watches the agent's progress frames as they arrive: when the method started and when it wrote its last byte. */
function watchProgress(frames: readonly unknown[]): { stop(): number | null } {
  let seen = frames.length;
  let started: number | null = null;
  let finished: number | null = null;
  const timer = setInterval(() => {
    for (; seen < frames.length; seen++) {
      const frame = frames[seen] as {
        type?: string;
        message?: string;
        bytes_done?: number;
        bytes_total?: number;
      };
      if (frame.type !== "progress") continue;
      if (frame.message?.endsWith(" started")) started = performance.now();
      else if (frame.bytes_total !== undefined && frame.bytes_done === frame.bytes_total)
        finished = performance.now();
    }
  }, 5);
  return {
    stop() {
      clearInterval(timer);
      return started !== null && finished !== null ? (finished - started) / 1000 : null;
    },
  };
}

interface EraseDevice {
  device: string;
  method: string | null;
  seconds: number;
  verified: boolean;
}

const ZEROS = {
  enable_discard: false,
  enable_nvme_secure_erase: false,
  shred_random_overwrite_iterations: 0,
  shred_final_overwrite_with_zeros: true,
};

async function main(): Promise<void> {
  await rm(DIR, { recursive: true, force: true });
  await mkdir(DIR, { recursive: true });
  const ramdisk = await buildRamdisk(join(DIR, "ramdisk"));
  const initrd = await benchRamdisk(ramdisk);
  const disks: QemuDisk[] = [];
  for (const device of overwriteDisks) {
    const path = await qcow2(device.slice(5), SIZE_GIB);
    await fill(path, SIZE_GIB);
    disks.push({
      path,
      format: "qcow2",
      bus: "virtio",
      serial: `BENCH-${device.slice(5)}`,
      discard: "unmap",
    });
  }
  // NVMe controllers in this order: nvme0 (format), nvme1 (discard), nvme2 (the thin one)
  for (const [name, gib, filled] of [
    ["nvme-format", SIZE_GIB, SIZE_GIB],
    ["nvme-discard", SIZE_GIB, SIZE_GIB],
    ["nvme-thin", THIN_GIB, Math.min(THIN_GIB, 2)],
  ] as const) {
    const path = await qcow2(name, gib);
    await fill(path, filled);
    disks.push({ path, format: "qcow2", bus: "nvme", serial: `BENCH-${name}`, discard: "unmap" });
  }

  const serialLog = join(DIR, "serial.log");
  const node = await bootRamdisk({
    ramdisk: { kernel: ramdisk.kernel, initrd },
    disks,
    append: "rdinit=/bench/init",
    serialLog,
    timeoutMs: 90 * 60_000,
  });
  try {
    await node.vm.waitForSerial(/ANVIL-BENCH-TOOLS-DONE/, { timeoutMs: 30 * 60_000, failOn: /Kernel panic/ });
    const tools = new Map<string, { seconds: number; rc: number }>();
    const serial = await node.vm.readSerial();
    for (const match of serial.matchAll(/^ANVIL-BENCH (\S+) ([\d.]+) (\d+)/gm)) {
      tools.set(match[1]!, { seconds: Number(match[2]), rc: Number(match[3]) });
    }
    const erase = async (args: Record<string, unknown>): Promise<EraseRun> => {
      const started = performance.now();
      const watch = watchProgress(node.conductor.frames);
      try {
        const result = (await node.call("erase_devices", args, 60 * 60_000)) as { devices: EraseDevice[] };
        const wall = (performance.now() - started) / 1000;
        return { wall, devices: result.devices, error: null, writeSeconds: watch.stop() };
      } catch (error) {
        const wall = (performance.now() - started) / 1000;
        return { wall, devices: [], error: (error as Error).message, writeSeconds: watch.stop() };
      }
    };
    const overwrite = await erase({ ...ZEROS, devices: [overwriteDisks[0]] });
    const discard = await erase({
      devices: [discardDisk],
      enable_nvme_secure_erase: false,
      shred_final_overwrite_with_zeros: false,
      shred_random_overwrite_iterations: 0,
    });
    const format = await erase({ devices: [nvmeDisk] });
    const thinErase = await erase({
      devices: [thinDisk],
      enable_nvme_secure_erase: false,
      shred_final_overwrite_with_zeros: false,
      shred_random_overwrite_iterations: 0,
    });
    const singles: number[] = [];
    for (const device of overwriteDisks) singles.push((await erase({ ...ZEROS, devices: [device] })).wall);
    const parallel = await erase({ ...ZEROS, devices: overwriteDisks, disk_erasure_concurrency: DISKS });

    const tool = (name: string): string => {
      const t = tools.get(name);
      return t === undefined ? "not run" : `${t.seconds.toFixed(2)} s${t.rc === 0 ? "" : ` (exit ${t.rc})`}`;
    };
    const agent = (run: EraseRun): string =>
      run.error !== null
        ? `failed: ${run.error}`
        : run.devices
            .map(
              (d) =>
                `${d.method ?? "skipped"} ${d.seconds.toFixed(2)} s (verified=${d.verified}; wall ${run.wall.toFixed(2)} s)`,
            )
            .join(", ");
    const ratio = (baseline: number | undefined, ours: number): string =>
      baseline === undefined || ours <= 0 ? "n/a" : `${(baseline / ours).toFixed(2)}x`;
    const ddSeconds = tools.get("dd")?.seconds;
    const sum = singles.reduce((a, b) => a + b, 0);
    const rows: [string, string][] = [
      [`(a) dd bs=4M oflag=direct ${overwriteDisks[0]} (${SIZE_GIB} GiB)`, tool("dd")],
      ["    agent overwrite, zeros + verify", agent(overwrite)],
      ["    ↳ its write pass alone (progress frames)", `${overwrite.writeSeconds?.toFixed(2) ?? "n/a"} s`],
      ["    speed vs dd, erase + verify", ratio(ddSeconds, overwrite.devices[0]?.seconds ?? 0)],
      ["    speed vs dd, the write pass (goal >= 0.95x)", ratio(ddSeconds, overwrite.writeSeconds ?? 0)],
      [`(b) blkdiscard ${discardDisk} (${SIZE_GIB} GiB)`, tool("blkdiscard")],
      ["    agent discard/write_zeroes + read-back", agent(discard)],
      [`(c) nvme format --ses=1 ${nvmeDisk}`, tool("nvme-format")],
      ["    agent NVMe erase + verify", agent(format)],
      [
        `(d) ${DISKS} disks alone, sum of walls`,
        `${sum.toFixed(2)} s (${singles.map((s) => s.toFixed(2)).join(" + ")})`,
      ],
      [`    ${DISKS} disks in parallel, wall`, `${parallel.wall.toFixed(2)} s`],
      [
        "    parallel vs one disk alone (goal ~1x)",
        `${(parallel.wall / (sum / DISKS)).toFixed(2)}x the time of one`,
      ],
      ["    parallel vs the sum", ratio(sum, parallel.wall)],
      [`(e) blkdiscard of the ${THIN_GIB} GiB thin disk`, tool("blkdiscard-thin")],
      ["    agent erase of the thin disk", agent(thinErase)],
    ];
    const width = Math.max(...rows.map(([k]) => k.length));
    console.log(`\nerase in the lab's machine (QEMU TCG, qcow2 discard=unmap), same boot, same devices`);
    for (const [k, v] of rows) console.log(`  ${k.padEnd(width)}  ${v}`);
    const toolOutput = [...serial.matchAll(/^ANVIL-BENCH-OUT (.*)$/gm)].map((m) => `    ${m[1]!.trim()}`);
    console.log(`the tools' own output (dd's rate among it):\n${toolOutput.join("\n")}`);
  } finally {
    await node.stop();
    // the console (the tools' output, the agent's log) outlives the disks
    await copyFile(serialLog, `${DIR}.serial.log`).catch(() => undefined);
    await rm(DIR, { recursive: true, force: true });
  }
}

await main();
