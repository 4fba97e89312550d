import { readdir, readFile, realpath, stat } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { exec } from "../../../shared/system/exec.ts";
import { ensureDeviceNode } from "../device-node.ts";
import {
  ARRAY_PARTITION_PREFIX,
  mdadmAssembleArgs,
  mdadmCreateArgs,
  mdadmExamineArgs,
  mdadmStopArgs,
  mdadmZeroSuperblockArgs,
  sfdiskScript,
} from "./commands.ts";
import type { MdSystem, RunningArray } from "./md-system.ts";
import type { ArrayPlan, HolderPlan } from "./plan.ts";

export class MdError extends Error {
  override name = "MdError";
}

/** Array states in which the array serves I/O (a resync may still run behind it). */
const RUNNING_STATES = new Set(["clean", "active", "active-idle", "read-auto", "write-pending"]);
/** Block devices that never hold md members. */
const NOT_MEMBERS = /^(md|ram|zram|sr|fd|dm-|nbd)\d*/;

/** md through mdadm, sfdisk and sysfs (no udev needed: device nodes come from devtmpfs or mknod). */
export class LinuxMd implements MdSystem {
  constructor(private readonly sys = "/sys") {}

  async listArrays(): Promise<RunningArray[]> {
    const names = (await readdir(`${this.sys}/block`).catch(() => [] as string[]))
      .filter((name) => /^md\d+$/.test(name))
      .sort((a, b) => Number(a.slice(2)) - Number(b.slice(2)));
    const arrays: RunningArray[] = [];
    for (const name of names) {
      const array = await this.readArray(name);
      if (array !== null) arrays.push(array);
    }
    return arrays;
  }

  async partition(holder: HolderPlan, signal: AbortSignal): Promise<void> {
    await run("sfdisk", ["--wipe", "always", "--wipe-partitions", "always", "-q", holder.disk], {
      signal,
      input: sfdiskScript(holder),
    });
    // sfdisk asked the kernel to re-read the table; the nodes appear in sysfs (and devtmpfs) shortly after.
    for (const partition of holder.partitions) {
      const name = basename(partition.path);
      await until(() => exists(`${this.sys}/class/block/${name}`), {
        what: `${partition.path} to appear`,
        signal,
      });
      await ensureDeviceNode(name, signal);
    }
  }

  async create(array: ArrayPlan, signal: AbortSignal): Promise<RunningArray> {
    // A stale superblock on a member would make mdadm ask before reusing it.
    for (const member of array.members) {
      await exec("mdadm", mdadmZeroSuperblockArgs(member), { signal, timeoutMs: 60_000 });
    }
    await run("mdadm", mdadmCreateArgs(array), { signal, input: "y\n" });
    const name = basename(array.device);
    let found: RunningArray | null = null;
    await until(
      async () => {
        found = await this.readArray(name);
        return found !== null && RUNNING_STATES.has(await this.attr(`block/${name}/md/array_state`));
      },
      { what: `${array.device} to run`, signal },
    );
    await ensureDeviceNode(name, signal);
    return found!;
  }

  async assemble(signal: AbortSignal): Promise<RunningArray[]> {
    const busy = new Set((await this.listArrays()).flatMap((array) => array.members));
    const groups = new Map<string, { uuid: string; members: string[] }>();
    for (const device of await this.devicesWithSuperblock(signal)) {
      if (busy.has(device)) continue;
      const uevent = await this.attr(`class/block/${basename(device)}/uevent`);
      const md = new RegExp(`^PARTNAME=${ARRAY_PARTITION_PREFIX}(md\\d+)$`, "m").exec(uevent)?.[1];
      if (md === undefined) continue;
      const examined = await exec("mdadm", ["--examine", "--export", device], { signal, timeoutMs: 60_000 });
      const uuid = /^MD_UUID=(\S+)$/m.exec(examined.stdout)?.[1];
      if (uuid === undefined) continue;
      const group = groups.get(md) ?? { uuid, members: [] };
      // Two arrays claiming one number (disks from two machines): keep the first, leave the other alone.
      if (group.uuid === uuid) group.members.push(device);
      groups.set(md, group);
    }
    for (const [md, group] of [...groups.entries()].sort()) {
      await run("mdadm", mdadmAssembleArgs(`/dev/${md}`, group.members), { signal });
      await until(async () => (await this.readArray(md)) !== null, { what: `/dev/${md} to run`, signal });
      await ensureDeviceNode(md, signal);
    }
    return this.listArrays();
  }

  async stop(device: string, signal: AbortSignal): Promise<void> {
    await run("mdadm", mdadmStopArgs(device), { signal });
  }

  async devicesWithSuperblock(signal: AbortSignal): Promise<string[]> {
    const names = (await readdir(`${this.sys}/class/block`).catch(() => [] as string[]))
      .filter((name) => !NOT_MEMBERS.test(name))
      .sort();
    const found: string[] = [];
    for (const name of names) {
      if (name.startsWith("loop") && !(await this.hasLoopBacking(name))) continue;
      const path = await ensureDeviceNode(name, signal);
      const examined = await exec("mdadm", mdadmExamineArgs(path), { signal, timeoutMs: 60_000 });
      if (examined.code === 0 && examined.stdout.includes("ARRAY")) found.push(path);
    }
    return found;
  }

  async zeroSuperblock(device: string, signal: AbortSignal): Promise<void> {
    await run("mdadm", mdadmZeroSuperblockArgs(device), { signal });
  }

  async diskOf(device: string): Promise<string> {
    const dir = await realpath(`${this.sys}/class/block/${basename(device)}`);
    const isPartition = await exists(`${dir}/partition`);
    return `/dev/${basename(isPartition ? dirname(dir) : dir)}`;
  }

  private async readArray(name: string): Promise<RunningArray | null> {
    const state = await this.attr(`block/${name}/md/array_state`);
    if (state === "" || state === "clear" || state === "inactive") return null;
    const slaves = (await readdir(`${this.sys}/block/${name}/slaves`).catch(() => [] as string[])).sort();
    const members = slaves.map((slave) => `/dev/${slave}`);
    const holders = [...new Set(await Promise.all(members.map((member) => this.diskOf(member))))];
    const sectors = Number(await this.attr(`block/${name}/size`)) || 0;
    return {
      device: `/dev/${name}`,
      members,
      holders,
      level: await this.attr(`block/${name}/md/level`),
      sizeBytes: sectors * 512,
      syncAction: await this.attr(`block/${name}/md/sync_action`),
    };
  }

  private async hasLoopBacking(name: string): Promise<boolean> {
    return (await this.attr(`class/block/${name}/loop/backing_file`)) !== "";
  }

  private async attr(path: string): Promise<string> {
    return (await readFile(`${this.sys}/${path}`, "utf8").catch(() => "")).trim();
  }
}

async function run(
  command: string,
  args: string[],
  options: { signal: AbortSignal; input?: string },
): Promise<string> {
  const result = await exec(command, args, { ...options, timeoutMs: 300_000 });
  if (result.code !== 0) {
    throw new MdError(`${command} ${args.join(" ")} failed (${result.code}): ${result.stderr.trim()}`);
  }
  return result.stdout;
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Polls `check` every 100 ms for up to 30 s. */
async function until(
  check: () => Promise<boolean>,
  options: { what: string; signal: AbortSignal },
): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await check())) {
    options.signal.throwIfAborted();
    if (Date.now() > deadline) throw new MdError(`timed out waiting for ${options.what}`);
    await sleep(100);
  }
}
