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
 * With --profile the guest's CPU is sampled 4 times a second from before dd to the end (/proc/stat, and the
 * agent's main thread apart from its other threads), so each row also says where the time went: user,
 * system, iowait, idle. The sampler is a shell loop that costs guest CPU itself (a busy guest shows it
 * as user time), so the timings worth comparing come from a run without it.
 * Usage: node --import tsx scripts/bench/erase-lab.ts [--size-gib 1] [--disks 3] [--thin-gib 10] [--smp 2]
 *          [--threadpool N]   (UV_THREADPOOL_SIZE for the agent; default: the ramdisk's)
 *          [--profile] [--shapes 8x2,4x4,4x1,16x2]   (overwrite write size MiB x writes in flight, tried on the dd disk, two rounds)
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
    smp: { type: "string", default: "2" },
    threadpool: { type: "string" },
    shapes: { type: "string", default: "8x2,4x4,4x1,16x2" },
    profile: { type: "boolean", default: false },
  },
});
const SIZE_GIB = Number(values["size-gib"]);
const DISKS = Number(values.disks);
const THIN_GIB = Number(values["thin-gib"]);
const SMP = Number(values.smp);
const THREADPOOL = values.threadpool === undefined ? null : Number(values.threadpool);
if (!(SIZE_GIB > 0) || !(DISKS >= 2 && DISKS <= 8) || !(THIN_GIB > 0) || !(SMP >= 1 && SMP <= 4)) {
  throw new Error("--size-gib > 0, --disks 2..8, --thin-gib > 0, --smp 1..4");
}
const SHAPES = (values.shapes ?? "")
  .split(",")
  .filter((s) => s !== "")
  .map((shape) => {
    const [mib, depth] = shape.split("x").map(Number);
    if (!Number.isInteger(mib) || !Number.isInteger(depth)) throw new Error(`--shapes: bad shape ${shape}`);
    return { mib: mib as number, depth: depth as number };
  });
if (THREADPOOL !== null && !(Number.isInteger(THREADPOOL) && THREADPOOL >= 1 && THREADPOOL <= 128)) {
  throw new Error("--threadpool 1..128");
}

/** virtio disks vda..: DISKS for overwriting (the first also for dd), one for discard, one thin. */
const overwriteDisks = Array.from({ length: DISKS }, (_, i) => `/dev/vd${String.fromCharCode(97 + i)}`);
// NOTE: discard runs on NVMe namespaces: QEMU's NVMe says deallocated blocks read zeros (DLFEAT), which
// makes a discard an erase; its virtio-blk promises nothing (and reports a rotational disk)
const nvmeDisk = "/dev/nvme0n1";
const discardDisk = "/dev/nvme1n1";
const thinDisk = "/dev/nvme2n1";

/** --profile: CPU samples for dd and the agent's erases (the host takes the last line before and after each). */
const SAMPLER = `( while :; do cpu ANVIL-CPU; sleep 0.25; done ) &
`;

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
# the whole guest's CPU ticks (user nice system idle iowait irq softirq) and the agent's utime+stime: its main
# thread (where JavaScript runs) and all its threads (libuv's pool among them). Shell builtins only (read,
# set, arithmetic): a fork costs milliseconds under TCG and the sampler runs 4 times a second.
agent=""
cpu() {
  prefix=$1
  read -r line </proc/stat
  set -- $line
  ticks="$2 $3 $4 $5 $6 $7 $8"
  if [ -z "$agent" ] || [ ! -d "/proc/$agent" ]; then agent=$(pidof anvil-agent 2>/dev/null); agent=\${agent%% *}; fi
  main=0; all=0
  if [ -n "$agent" ]; then
    for task in /proc/$agent/task/*; do
      read -r line 2>/dev/null <"$task/stat" || continue
      # after the ") " that closes the thread's name (which may hold spaces): state is 1st, utime 12th, stime 13th
      set -- \${line##*) }
      all=$((all + \${12} + \${13}))
      if [ "\${task##*/}" = "$agent" ]; then main=$((\${12} + \${13})); fi
    done
  fi
  echo "$prefix $ticks $main $all"
}
timed() {
  name=$1; shift
  cpu "ANVIL-CPU-AT $name-start"
  a=$(now); "$@" >/tmp/bench.out 2>&1; rc=$?; b=$(now)
  cpu "ANVIL-CPU-AT $name-end"
  echo "ANVIL-BENCH $name $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", b - a}') $rc"
  sed 's/^/ANVIL-BENCH-OUT /' /tmp/bench.out
}
echo "ANVIL-BENCH-CPUS $(grep -c ^processor /proc/cpuinfo)"
# every clock read of the agent's event loop costs an emulated device read when this is not tsc
echo "ANVIL-BENCH-CLOCK $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"

${values.profile ? SAMPLER : ""}# exactly the device's size, so dd ends without ENOSPC
blocks=$(( $(cat /sys/block/${overwriteDisks[0]!.slice(5)}/size) / 8192 ))
timed dd dd if=/dev/zero of=${overwriteDisks[0]} bs=4M count=$blocks oflag=direct
timed nvme-format nvme format ${nvmeDisk} --ses=1 --force
timed blkdiscard blkdiscard ${discardDisk}
timed blkdiscard-thin blkdiscard ${thinDisk}
echo "ANVIL-BENCH-TOOLS-DONE"
${
  THREADPOOL === null
    ? ""
    : `export UV_THREADPOOL_SIZE=${THREADPOOL}
`
}umount /sys /proc 2>/dev/null
umount /dev 2>/dev/null
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

/** The guest's CPU ticks (USER_HZ = 100) at one moment, as the bench init's `cpu` prints them. */
type CpuTicks = number[];
const CPU_FIELDS = ["user", "nice", "system", "idle", "iowait", "irq", "softirq"] as const;

function parseTicks(line: string | undefined): CpuTicks | null {
  const ticks = line?.trim().split(/\s+/).map(Number);
  return ticks?.length === CPU_FIELDS.length + 2 && ticks.every(Number.isFinite) ? ticks : null;
}

/** The last CPU sample the guest printed so far. */
async function lastTicks(vm: { readSerial(): Promise<string> }): Promise<CpuTicks | null> {
  // the agent's log shares the console: a sample may be cut by one of its lines, take the last whole one
  const lines = [...(await vm.readSerial()).matchAll(/^ANVIL-CPU (.*)$/gm)];
  for (const line of lines.reverse()) {
    const ticks = parseTicks(line[1]);
    if (ticks !== null) return ticks;
  }
  return null;
}

/** Where the guest's time went between two samples: shares of all CPUs, and the agent's threads in seconds. */
function cpuShare(before: CpuTicks | null, after: CpuTicks | null): string {
  if (before === null || after === null) return "no CPU samples";
  const delta = after.map((v, i) => v - (before[i] ?? 0));
  const total = delta.slice(0, CPU_FIELDS.length).reduce((a, b) => a + b, 0) || 1;
  const pct = (name: (typeof CPU_FIELDS)[number]): string =>
    `${name} ${Math.round((100 * (delta[CPU_FIELDS.indexOf(name)] ?? 0)) / total)}%`;
  const main = (delta[7] ?? 0) / 100;
  const others = ((delta[8] ?? 0) - (delta[7] ?? 0)) / 100;
  return `${["user", "system", "iowait", "idle", "softirq"].map((n) => pct(n as (typeof CPU_FIELDS)[number])).join(", ")}; agent main thread ${main.toFixed(2)} s, other threads ${others.toFixed(2)} s`;
}

interface EraseRun {
  wall: number;
  /** The guest's CPU over the call (sampled once a second, so ±1 s at each end). */
  cpu: string;
  devices: EraseDevice[];
  error: string | null;
  /** From the method's "started" progress frame to its last bytes frame: the writing alone, no verify. */
  writeSeconds: number | null;
  /** The guest's CPU over that window. */
  writeCpu: string;
}

/** Watches the agent's progress frames as they arrive: when the method started and when it wrote its last byte. */
function watchProgress(
  frames: readonly unknown[],
  vm: { readSerial(): Promise<string> },
): { stop(): { seconds: number | null; cpu: Promise<string> } } {
  let seen = frames.length;
  let started: number | null = null;
  let finished: number | null = null;
  // the guest's CPU samples nearest those two moments (sampled 4 times a second)
  let startTicks: Promise<CpuTicks | null> = Promise.resolve(null);
  let endTicks: Promise<CpuTicks | null> = Promise.resolve(null);
  const timer = setInterval(() => {
    for (; seen < frames.length; seen++) {
      const frame = frames[seen] as {
        type?: string;
        message?: string;
        bytes_done?: number;
        bytes_total?: number;
      };
      if (frame.type !== "progress") continue;
      if (frame.message?.endsWith(" started")) {
        started = performance.now();
        startTicks = lastTicks(vm);
      } else if (frame.bytes_total !== undefined && frame.bytes_done === frame.bytes_total) {
        finished = performance.now();
        endTicks = lastTicks(vm);
      }
    }
  }, 5);
  return {
    stop() {
      clearInterval(timer);
      const seconds = started !== null && finished !== null ? (finished - started) / 1000 : null;
      return { seconds, cpu: Promise.all([startTicks, endTicks]).then(([a, b]) => cpuShare(a, b)) };
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
    // NOTE: with more than one vCPU the guest kernel finds the emulated TSCs "unsynchronized" and falls back
    // to the HPET, where every clock read (libuv reads one per loop turn) is an emulated device access; TCG's
    // TSCs all follow the host's clock, so tell the kernel to trust them
    append: `rdinit=/bench/init${SMP > 1 ? " tsc=reliable" : ""}`,
    serialLog,
    cpus: SMP,
    timeoutMs: 90 * 60_000,
  });
  try {
    await node.vm.waitForSerial(/ANVIL-BENCH-TOOLS-DONE/, { timeoutMs: 30 * 60_000, failOn: /Kernel panic/ });
    const tools = new Map<string, { seconds: number; rc: number }>();
    const serial = await node.vm.readSerial();
    const toolCpu = (name: string): string =>
      cpuShare(
        parseTicks(serial.match(new RegExp(`^ANVIL-CPU-AT ${name}-start (.*)$`, "m"))?.[1]),
        parseTicks(serial.match(new RegExp(`^ANVIL-CPU-AT ${name}-end (.*)$`, "m"))?.[1]),
      ).replace(/; agent.*/, "");
    const guestCpus = serial.match(/^ANVIL-BENCH-CPUS (\d+)/m)?.[1] ?? "?";
    const clock = serial.match(/^ANVIL-BENCH-CLOCK (\S+)/m)?.[1] ?? "?";
    for (const match of serial.matchAll(/^ANVIL-BENCH (\S+) ([\d.]+) (\d+)/gm)) {
      tools.set(match[1]!, { seconds: Number(match[2]), rc: Number(match[3]) });
    }
    const erase = async (args: Record<string, unknown>): Promise<EraseRun> => {
      const before = await lastTicks(node.vm);
      const started = performance.now();
      const watch = watchProgress(node.conductor.frames, node.vm);
      let outcome: { devices: EraseDevice[]; error: string | null };
      try {
        const result = (await node.call("erase_devices", args, 60 * 60_000)) as { devices: EraseDevice[] };
        outcome = { devices: result.devices, error: null };
      } catch (error) {
        outcome = { devices: [], error: (error as Error).message };
      }
      const wall = (performance.now() - started) / 1000;
      const { seconds: writeSeconds, cpu: writeCpu } = watch.stop();
      // the sampler prints once a second: let the sample after the end reach the serial log
      await new Promise((done) => setTimeout(done, 1500));
      const cpu = cpuShare(before, await lastTicks(node.vm));
      return { wall, ...outcome, writeSeconds, writeCpu: await writeCpu, cpu };
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
    const singleRuns: EraseRun[] = [];
    for (const device of overwriteDisks) singleRuns.push(await erase({ ...ZEROS, devices: [device] }));
    const singles = singleRuns.map((run) => run.wall);
    const parallel = await erase({ ...ZEROS, devices: overwriteDisks, disk_erasure_concurrency: DISKS });
    const shapeRuns: { shape: string; run: EraseRun }[] = [];
    for (let round = 0; round < 2; round++) {
      for (const { mib, depth } of SHAPES) {
        const run = await erase({
          ...ZEROS,
          devices: [overwriteDisks[0]],
          overwrite_block_mib: mib,
          overwrite_depth: depth,
        });
        shapeRuns.push({ shape: `${mib} MiB x ${depth}`, run });
      }
    }
    // the disks' own seconds (erase + verify), without each call's probing before it
    const diskSeconds = (runs: EraseRun[]): number[] => runs.flatMap((r) => r.devices.map((d) => d.seconds));
    const singleDisk = diskSeconds(singleRuns);
    const parallelDisk = diskSeconds([parallel]);

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
      ["    ↳ guest CPU during dd", toolCpu("dd")],
      ["    agent overwrite, zeros + verify", agent(overwrite)],
      ["    ↳ guest CPU during the call", overwrite.cpu],
      ["    ↳ its write pass alone (progress frames)", `${overwrite.writeSeconds?.toFixed(2) ?? "n/a"} s`],
      ["    ↳ guest CPU during the write pass", overwrite.writeCpu],
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
      ["    ↳ guest CPU, one disk alone (the first)", singleRuns[0]?.cpu ?? "n/a"],
      ["    ↳ guest CPU, in parallel", parallel.cpu],
      [
        "    ↳ write passes: one alone / in parallel",
        `${singleRuns[0]?.writeCpu ?? "n/a"} / ${parallel.writeCpu}`,
      ],
      [
        "    per-disk seconds alone / in parallel",
        `${singleDisk.map((s) => s.toFixed(2)).join(" + ")} / ${parallelDisk.map((s) => s.toFixed(2)).join(", ")}`,
      ],
      [
        "    slowest disk in parallel vs mean alone",
        `${(Math.max(...parallelDisk) / (singleDisk.reduce((a, b) => a + b, 0) / (singleDisk.length || 1))).toFixed(2)}x`,
      ],
      [
        "    parallel vs one disk alone (goal ~1x)",
        `${(parallel.wall / (sum / DISKS)).toFixed(2)}x the time of one`,
      ],
      ["    parallel vs the sum", ratio(sum, parallel.wall)],
      [`(e) blkdiscard of the ${THIN_GIB} GiB thin disk`, tool("blkdiscard-thin")],
      ["    agent erase of the thin disk", agent(thinErase)],
    ];
    const width = Math.max(...rows.map(([k]) => k.length));
    console.log(
      `\nerase in the lab's machine (QEMU TCG, ${guestCpus} vCPU, clocksource ${clock}, UV_THREADPOOL_SIZE ${THREADPOOL ?? "ramdisk default"}, qcow2 discard=unmap), same boot, same devices`,
    );
    for (const [k, v] of rows) console.log(`  ${k.padEnd(width)}  ${v}`);
    if (shapeRuns.length > 0) {
      console.log(
        `overwrite shapes on ${overwriteDisks[0]} (one zero pass; write pass from progress frames; two rounds):`,
      );
      for (const { shape, run } of shapeRuns) {
        const seconds = run.writeSeconds ?? 0;
        console.log(
          `  ${shape.padEnd(12)} write ${seconds.toFixed(2)} s = ${ratio(ddSeconds, seconds)} dd; with verify ${run.devices[0]?.seconds.toFixed(2) ?? run.error} s; ${run.writeCpu}`,
        );
      }
    }
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
