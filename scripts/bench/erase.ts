/**
 * Erase benchmark (not a test): the agent's erase methods on loop devices backed by files on the real disk,
 * beside `dd if=/dev/zero oflag=direct` and `blkdiscard` on the same device in the same run.
 *   (a) overwrite, one pass of zeros, against dd bs=4M oflag=direct       goal: >= 0.95x dd
 *       (and one random pass, and the verify pass's own time)
 *   (b) discard + verify against a bare blkdiscard; a 10 GiB thin (sparse-file) device   goal: seconds
 *   (c) N disks erased in parallel against the sum of erasing each alone  goal: ~the time of one
 *   (d) the same with each loop device throttled by a blkio cgroup, as separate disks of one speed would be
 * Usage: node --import tsx scripts/bench/erase.ts [--size-gib 1] [--disks 3] [--thin-gib 10]
 * Run it under `flock /tmp/anvil-heavy.lock` on a shared machine.
 */
import { mkdir, rm, rmdir, stat, truncate, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { randomBytes } from "node:crypto";
import { open } from "node:fs/promises";
import { eraseDevices } from "../../agent/disk/erase/erase-devices.ts";
import { overwrite } from "../../agent/disk/erase/overwrite.ts";
import { planSamples, verifySamples } from "../../agent/disk/erase/verify.ts";
import { LinuxDiskTools } from "../../agent/hardware/linux/disk-tools.ts";
import { EraseOptionsSchema } from "../../shared/erase.ts";
import type { EraseOptions } from "../../shared/erase.ts";
import { blankDisk } from "../../shared/inventory.ts";
import type { Disk } from "../../shared/inventory.ts";
import { silentLogger } from "../../shared/log.ts";
import { runOk } from "../../test/helpers/run.ts";

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const ROOT = resolve(import.meta.dirname, "../..");
const DIR = join(ROOT, ".tmp/bench-erase");

const { values } = parseArgs({
  options: {
    "size-gib": { type: "string", default: "1" },
    disks: { type: "string", default: "3" },
    "thin-gib": { type: "string", default: "10" },
  },
});
const SIZE = Math.round(Number(values["size-gib"]) * GiB);
const DISKS = Number(values.disks);
const THIN = Math.round(Number(values["thin-gib"]) * GiB);

const must = (command: string, args: string[]): Promise<string> =>
  runOk(command, args, { timeoutMs: 60 * 60_000 });
const loops: string[] = [];

/** A loop device with direct I/O to its backing file, as close to a disk as a file gets. */
async function loopOver(name: string, options: { size: number; allocate: boolean }): Promise<Disk> {
  const file = join(DIR, name);
  await writeFile(file, "");
  if (options.allocate) await must("fallocate", ["--length", String(options.size), file]);
  else await truncate(file, options.size);
  const device = (await must("losetup", ["--find", "--show", "--direct-io=on", file])).trim();
  loops.push(device);
  return { ...blankDisk(device, options.size), rotational: true };
}

async function timed<T>(fn: () => Promise<T>): Promise<{ seconds: number; value: T }> {
  const started = performance.now();
  const value = await fn();
  return { seconds: (performance.now() - started) / 1000, value };
}

/** Best of `times`: the machine is shared, and the least disturbed run is the one that measures the code. */
async function best(times: number, fn: () => Promise<unknown>): Promise<number> {
  let winner = Infinity;
  for (let i = 0; i < times; i++) winner = Math.min(winner, (await timed(fn)).seconds);
  return winner;
}

const options = (overrides: Partial<EraseOptions>): EraseOptions => ({
  ...EraseOptionsSchema.parse({}),
  ...overrides,
});
const ZEROS_ONLY = options({ enable_discard: false, shred_random_overwrite_iterations: 0 });

function erase(disks: Disk[], eraseOptions: EraseOptions) {
  return eraseDevices({
    disks,
    mode: "full",
    options: eraseOptions,
    tools: new LinuxDiskTools(),
    signal: new AbortController().signal,
    logger: silentLogger,
    report: () => undefined,
  });
}

const rate = (bytes: number, seconds: number): string => `${(bytes / MiB / seconds).toFixed(0)} MB/s`;
const line = (label: string, text: string): void => console.log(`${label.padEnd(52)} ${text}`);

/** Scatters some data over a thin device so its discard has something to drop. */
async function scatter(device: string, size: number): Promise<void> {
  const handle = await open(device, "r+");
  const data = randomBytes(4 * MiB);
  for (let at = 0; at + data.length <= size; at += 256 * MiB) await handle.write(data, 0, data.length, at);
  await handle.sync();
  await handle.close();
}

async function main(): Promise<void> {
  await mkdir(DIR, { recursive: true });
  console.log(
    `erase bench: ${SIZE / GiB} GiB loop devices (direct I/O to files on the real disk), ${DISKS} in parallel, ${THIN / GiB} GiB thin device`,
  );
  const disk = await loopOver("a.img", { size: SIZE, allocate: true });
  const dev = disk.name;

  // (a) overwrite vs dd, alternating so neither always gets the warmer disk. A first pass of dd allocates the
  // backing file's extents, so no contender pays for that.
  const count = String(SIZE / (4 * MiB));
  const ddOnce = (device: string) =>
    must("dd", ["if=/dev/zero", `of=${device}`, "bs=4M", `count=${count}`, "oflag=direct", "status=none"]);
  await ddOnce(dev);
  const shapes = [
    { label: "8 MiB x 2 in flight (the agent's)", blockSize: 8 * MiB, depth: 2 },
    { label: "4 MiB x 1 (dd's shape)", blockSize: 4 * MiB, depth: 1 },
    { label: "4 MiB x 4", blockSize: 4 * MiB, depth: 4 },
    { label: "16 MiB x 2", blockSize: 16 * MiB, depth: 2 },
  ];
  const shapeTimes = shapes.map(() => Infinity);
  let dd = Infinity;
  for (let i = 0; i < 5; i++) {
    dd = Math.min(dd, await best(1, () => ddOnce(dev)));
    for (const [index, shape] of shapes.entries()) {
      const seconds = await best(1, () =>
        overwrite({ path: dev, size: SIZE, randomPasses: 0, finalZeros: true, samples: [], ...shape }),
      );
      shapeTimes[index] = Math.min(shapeTimes[index] ?? Infinity, seconds);
    }
  }
  const ours = shapeTimes[0] ?? Infinity;
  const random = await best(3, () =>
    overwrite({ path: dev, size: SIZE, randomPasses: 1, finalZeros: false, samples: [] }),
  );
  const samples = planSamples(SIZE);
  const verify = await best(2, () => verifySamples(dev, samples, { expect: { kind: "zeros" } }));
  console.log("\n(a) overwrite (best of 5, alternating)");
  line("dd if=/dev/zero bs=4M oflag=direct", `${dd.toFixed(2)} s  ${rate(SIZE, dd)}`);
  line(
    "agent overwrite, one pass of zeros",
    `${ours.toFixed(2)} s  ${rate(SIZE, ours)}  ratio ${(dd / ours).toFixed(2)}x dd (goal >= 0.95)`,
  );
  for (const [index, shape] of shapes.entries()) {
    const seconds = shapeTimes[index] ?? Infinity;
    line(`  writes of ${shape.label}`, `${seconds.toFixed(2)} s  ratio ${(dd / seconds).toFixed(2)}x dd`);
  }
  line(
    "agent overwrite, one random pass (CSPRNG)",
    `${random.toFixed(2)} s  ${rate(SIZE, random)}  ratio ${(dd / random).toFixed(2)}x dd`,
  );
  line(`verify pass (${samples.length} samples)`, `${verify.toFixed(3)} s`);

  // (b) discard
  const blk = await best(3, () => must("blkdiscard", [dev]));
  const discard = await best(3, () => erase([disk], options({})));
  const thin = await loopOver("thin.img", { size: THIN, allocate: false });
  await scatter(thin.name, THIN);
  const thinErase = await timed(() => erase([thin], options({})));
  console.log("\n(b) discard");
  line("blkdiscard", `${blk.toFixed(3)} s`);
  line(
    "agent discard + verify",
    `${discard.toFixed(3)} s  ratio ${(discard / Math.max(blk, 1e-3)).toFixed(2)}x blkdiscard's time`,
  );
  line(
    `agent erase of a ${THIN / GiB} GiB thin device (${thinErase.value[0]?.method})`,
    `${thinErase.seconds.toFixed(2)} s (goal: seconds)`,
  );

  // (c) parallel
  const disks = [
    disk,
    ...(await Promise.all(
      Array.from({ length: DISKS - 1 }, (_, i) => loopOver(`p${i}.img`, { size: SIZE, allocate: true })),
    )),
  ];
  // Every disk written once first, as (a)'s was: the first write into fresh extents costs more.
  for (const one of disks.slice(1)) await ddOnce(one.name);
  let sum = 0;
  for (const one of disks) sum += (await timed(() => erase([one], ZEROS_ONLY))).seconds;
  const parallel = (
    await timed(() => erase(disks, options({ ...ZEROS_ONLY, disk_erasure_concurrency: DISKS })))
  ).seconds;
  const thins = [
    thin,
    ...(await Promise.all(
      Array.from({ length: DISKS - 1 }, (_, i) => loopOver(`t${i}.img`, { size: THIN, allocate: false })),
    )),
  ];
  for (const one of thins) await scatter(one.name, THIN);
  let thinSum = 0;
  for (const one of thins) thinSum += (await timed(() => erase([one], options({})))).seconds;
  for (const one of thins) await scatter(one.name, THIN);
  const thinParallel = (await timed(() => erase(thins, options({ disk_erasure_concurrency: DISKS }))))
    .seconds;
  console.log(`\n(c) ${DISKS} disks in parallel`);
  line(`overwrite: sum of ${DISKS} alone`, `${sum.toFixed(2)} s`);
  line(
    `overwrite: ${DISKS} in parallel`,
    `${parallel.toFixed(2)} s  ratio ${(parallel / sum).toFixed(2)}x the sum, ${(parallel / (sum / DISKS)).toFixed(2)}x one`,
  );
  line(`discard of thin devices: sum of ${DISKS} alone`, `${thinSum.toFixed(2)} s`);
  line(
    `discard of thin devices: ${DISKS} in parallel`,
    `${thinParallel.toFixed(2)} s  ratio ${(thinParallel / thinSum).toFixed(2)}x the sum, ${(thinParallel / (thinSum / DISKS)).toFixed(2)}x one`,
  );
  console.log(
    "  (the loop devices share one physical disk: bandwidth-bound overwrites cannot all run at full speed)",
  );
  await throttledParallel(disks);
}

const CGROUP = "/sys/fs/cgroup/blkio/anvil-erase-bench";
const THROTTLE_BPS = 100 * 1000 * 1000;

/**
 * (d) Independent disks, emulated: a cgroup-v1 blkio throttle caps each loop device's writes (like a disk of
 * that speed), so the shared physical disk is no longer the limit and parallelism shows as it would on
 * separate drives. Only this process's I/O to these loop devices is throttled.
 */
async function throttledParallel(disks: Disk[]): Promise<void> {
  const size = Math.min(SIZE, 256 * MiB);
  try {
    await mkdir(CGROUP, { recursive: true });
    for (const disk of disks) {
      const { rdev } = await stat(disk.name);
      const device = `${Math.floor(rdev / 256) & 0xfff}:${(rdev & 0xff) | ((rdev >> 12) & 0xfff00)}`;
      await writeFile(`${CGROUP}/blkio.throttle.write_bps_device`, `${device} ${THROTTLE_BPS}`);
    }
    await writeFile(`${CGROUP}/cgroup.procs`, String(process.pid));
  } catch (error) {
    console.log(`\n(d) skipped: no writable blkio cgroup here (${(error as Error).message})`);
    return;
  }
  try {
    const small = disks.map((disk) => ({ ...disk, size }));
    let sum = 0;
    for (const one of small) sum += (await timed(() => erase([one], ZEROS_ONLY))).seconds;
    const parallel = (
      await timed(() => erase(small, options({ ...ZEROS_ONLY, disk_erasure_concurrency: small.length })))
    ).seconds;
    console.log(
      `\n(d) ${small.length} disks of ${size / MiB} MiB, each throttled to ${THROTTLE_BPS / 1e6} MB/s (blkio cgroup)`,
    );
    line(`overwrite: sum of ${small.length} alone`, `${sum.toFixed(2)} s`);
    line(
      `overwrite: ${small.length} in parallel`,
      `${parallel.toFixed(2)} s  ratio ${(parallel / (sum / small.length)).toFixed(2)}x one (goal ~1)`,
    );
  } finally {
    await writeFile("/sys/fs/cgroup/blkio/cgroup.procs", String(process.pid)).catch(() => undefined);
    await rmdir(CGROUP).catch(() => undefined);
  }
}

try {
  await main();
} finally {
  for (const loop of loops) await runOk("losetup", ["--detach", loop]).catch(() => undefined);
  await rm(DIR, { recursive: true, force: true });
}
