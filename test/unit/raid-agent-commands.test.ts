import { describe, expect, it } from "vitest";
import { GIB } from "../../shared/inventory.ts";
import type { Disk } from "../../shared/inventory.ts";
import { CodedError } from "../../shared/errors.ts";
import { silentLogger } from "../../shared/log.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { simulatedInventory } from "../../agent/hardware/simulated/sample-inventory.ts";
import type { HardwareBackend } from "../../agent/hardware/backend.ts";
import type { MdSystem, RunningArray } from "../../agent/disk/raid/md-system.ts";
import type { ArrayPlan, HolderPlan } from "../../agent/disk/raid/plan.ts";
import type { CommandContext } from "../../agent/commands/command.ts";
import { createRaid } from "../../agent/commands/create-raid.ts";
import { resolveTarget } from "../../agent/commands/target-disk.ts";

/** md as a recording double: arrays "run" as soon as they are created. */
class FakeMd implements MdSystem {
  readonly calls: string[] = [];
  readonly arrays: RunningArray[] = [];
  failOn: string | null = null;

  async listArrays(): Promise<RunningArray[]> {
    return [...this.arrays];
  }
  async partition(holder: HolderPlan): Promise<void> {
    this.calls.push(`partition ${holder.disk} ${holder.partitions.map((p) => p.role).join(",")}`);
    if (this.failOn === holder.disk) throw new Error("sfdisk: device busy");
  }
  async create(array: ArrayPlan): Promise<RunningArray> {
    this.calls.push(`create ${array.device} ${array.level} ${array.members.join(",")}`);
    const running = {
      device: array.device,
      members: array.members,
      holders: array.holders,
      level: `raid${array.level}`,
      sizeBytes: array.memberBytes,
      syncAction: "resync",
    };
    this.arrays.push(running);
    return running;
  }
  async assemble(): Promise<RunningArray[]> {
    this.calls.push("assemble");
    return [...this.arrays];
  }
  async stop(device: string): Promise<void> {
    this.calls.push(`stop ${device}`);
  }
  async devicesWithSuperblock(): Promise<string[]> {
    return [];
  }
  async zeroSuperblock(device: string): Promise<void> {
    this.calls.push(`zero ${device}`);
  }
  async diskOf(device: string): Promise<string> {
    return device.replace(/\d+$/, "");
  }
}

function machine(md: FakeMd): HardwareBackend {
  const inventory = simulatedInventory({
    macs: ["52:54:00:00:00:01"],
    disks: [
      { name: "/dev/vda", size: 10 * GIB, serial: "A" },
      { name: "/dev/vdb", size: 10 * GIB, serial: "B" },
      { name: "/dev/vdc", size: 20 * GIB, serial: "C" },
    ],
  });
  const simulated = new SimulatedBackend({ inventory });
  const backend: HardwareBackend = {
    name: "linux",
    md,
    diskTools: simulated.diskTools,
    burnin: simulated.burnin,
    inventory: () => simulated.inventory(),
    disks: async (): Promise<Disk[]> => [
      ...(await simulated.disks()),
      ...md.arrays.map((array) => ({ ...inventory.disks[0]!, name: array.device, serial: null })),
    ],
    macs: () => simulated.macs(),
    bmcAddress: () => simulated.bmcAddress(),
    bootId: () => simulated.bootId(),
    sync: () => simulated.sync(),
    reboot: () => simulated.reboot(),
    powerOff: () => simulated.powerOff(),
  };
  return backend;
}

function context(backend: HardwareBackend): CommandContext {
  return {
    backend,
    signal: new AbortController().signal,
    progress: () => undefined,
    afterResult: () => undefined,
    logger: silentLogger,
  };
}

const raid1 = {
  logical_disks: [
    {
      size_gb: "MAX" as const,
      raid_level: "1" as const,
      controller: "software",
      physical_disks: ["vda", "vdb"],
    },
  ],
};

describe("create_raid with a fake md", () => {
  it("partitions each holder, then creates md0, and reports raid_config", async () => {
    const md = new FakeMd();
    const value = (await createRaid(raid1, context(machine(md)))) as {
      raid_config: { logical_disks: { device: string; is_root_volume: boolean }[] };
    };
    expect(md.calls).toEqual([
      "partition /dev/vda bios_boot,raid",
      "partition /dev/vdb bios_boot,raid",
      "create /dev/md0 1 /dev/vda2,/dev/vdb2",
    ]);
    expect(value.raid_config.logical_disks).toEqual([
      expect.objectContaining({ device: "/dev/md0", is_root_volume: true }),
    ]);
  });

  it("refuses hardware RAID, and refuses while arrays exist", async () => {
    const md = new FakeMd();
    const backend = machine(md);
    await expect(
      createRaid({ logical_disks: [{ size_gb: 10, raid_level: "1" }] }, context(backend)),
    ).rejects.toMatchObject({ code: "BAD_ARGS", message: expect.stringContaining('controller "software"') });
    await createRaid(raid1, context(backend));
    await expect(createRaid(raid1, context(backend))).rejects.toMatchObject({
      code: "COMMAND_FAILED",
      message: expect.stringContaining("already exists (/dev/md0)"),
    });
  });

  it("names the disk when partitioning fails", async () => {
    const md = new FakeMd();
    md.failOn = "/dev/vdb";
    const failure = createRaid(raid1, context(machine(md)));
    await expect(failure).rejects.toBeInstanceOf(CodedError);
    await expect(failure).rejects.toThrow("partitioning /dev/vdb: sfdisk: device busy");
  });

  it("answers NOT_SUPPORTED on a backend without md", async () => {
    const backend = new SimulatedBackend({
      inventory: simulatedInventory({ macs: ["52:54:00:00:00:01"], disks: [] }),
    });
    await expect(createRaid(raid1, context(backend))).rejects.toMatchObject({ code: "NOT_SUPPORTED" });
  });
});

describe("the write target with software RAID", () => {
  it("is md0 without hints, and for hints that pick one of its holders", async () => {
    const md = new FakeMd();
    const backend = machine(md);
    await createRaid(raid1, context(backend));
    expect((await resolveTarget(backend, undefined)).disk.name).toBe("/dev/md0");
    expect((await resolveTarget(backend, { serial: "B" })).disk.name).toBe("/dev/md0");
    expect((await resolveTarget(backend, { serial: "B" })).array?.holders).toEqual(["/dev/vda", "/dev/vdb"]);
  });

  it("re-assembles arrays of an earlier boot before choosing", async () => {
    const md = new FakeMd();
    const backend = machine(md);
    await createRaid(raid1, context(backend));
    const earlier = md.arrays.splice(0);
    md.assemble = async () => {
      md.calls.push("assemble");
      md.arrays.push(...earlier);
      return [...md.arrays];
    };
    expect((await resolveTarget(backend, undefined)).disk.name).toBe("/dev/md0");
    expect(md.calls.at(-1)).toBe("assemble");
  });

  it("is the disk the hints pick when it is outside the RAID", async () => {
    const md = new FakeMd();
    const backend = machine(md);
    await createRaid(raid1, context(backend));
    const target = await resolveTarget(backend, { serial: "C" });
    expect(target).toMatchObject({ disk: { name: "/dev/vdc" }, array: null });
  });
});
