import { describe, expect, it } from "vitest";
import { GIB, blankDisk } from "../../shared/inventory.ts";
import { LogicalDiskSchema } from "../../shared/raid.ts";
import { StepDescriptorSchema, type StepDescriptor } from "../../shared/steps.ts";
import { COMMAND_ARGS, parseCommandArgs } from "../../shared/protocol.ts";
import { mdadmCreateArgs, sfdiskScript } from "../../agent/disk/raid/commands.ts";
import { planSoftwareRaid } from "../../agent/disk/raid/plan.ts";
import {
  grubInstallArgs,
  minimalGrubConfig,
  withBiosBootPartition,
} from "../../agent/disk/bootloader/grub-commands.ts";
import { offeredSteps } from "../../agent/commands/registry.ts";

const disks = ["/dev/vda", "/dev/vdb", "/dev/vdc", "/dev/nvme0n1"].map((name) => blankDisk(name, 2 * GIB));

describe("mdadm and sfdisk command lines", () => {
  const plan = planSoftwareRaid(
    [
      LogicalDiskSchema.parse({
        size_gb: "MAX",
        raid_level: "1+0",
        controller: "software",
        volume_name: "data",
      }),
      LogicalDiskSchema.parse({
        size_gb: 1,
        raid_level: "1",
        controller: "software",
        is_root_volume: true,
        physical_disks: ["vda", "vdb"],
      }),
    ],
    disks,
    { bootMode: "bios" },
  );

  it("creates the root volume as md0 with metadata 1.2 and --run (never a prompt)", () => {
    expect(mdadmCreateArgs(plan.arrays[0]!)).toEqual([
      "--create",
      "/dev/md0",
      "--run",
      "--metadata=1.2",
      "--level=1",
      "--raid-devices=2",
      "/dev/vda2",
      "/dev/vdb2",
    ]);
  });

  it("passes RAID-1+0 to mdadm as level 10 with its volume name", () => {
    expect(mdadmCreateArgs(plan.arrays[1]!)).toEqual([
      "--create",
      "/dev/md1",
      "--run",
      "--metadata=1.2",
      "--level=10",
      "--raid-devices=4",
      "--name=data",
      "/dev/nvme0n1p2",
      "/dev/vda3",
      "/dev/vdb3",
      "/dev/vdc2",
    ]);
  });

  it("writes each holder's GPT: BIOS boot, then Linux RAID partitions, in MiB", () => {
    const vda = plan.holders.find((holder) => holder.disk === "/dev/vda")!;
    expect(sfdiskScript(vda).split("\n")).toEqual([
      "label: gpt",
      "start=1MiB, size=2MiB, type=21686148-6449-6E6F-744E-656564454649, name=bios_boot",
      "start=3MiB, size=1024MiB, type=A19D880F-05FC-4D3B-A006-743F0F84911E, name=anvil-md0",
      "start=1027MiB, size=1020MiB, type=A19D880F-05FC-4D3B-A006-743F0F84911E, name=anvil-md1",
      "",
    ]);
  });
});

describe("GRUB command lines", () => {
  it("BIOS: grub-install to the disk with the modules core.img needs for md and GPT", () => {
    expect(
      grubInstallArgs({
        bootMode: "bios",
        disk: "/dev/vda",
        bootDirectory: "/tmp/r/boot",
        modules: ["mdraid1x", "ext2"],
      }),
    ).toEqual([
      "--target=i386-pc",
      "--boot-directory=/tmp/r/boot",
      "--recheck",
      "--modules=mdraid1x ext2",
      "/dev/vda",
    ]);
  });

  it("UEFI: the removable path on the ESP, NVRAM untouched, no disk argument", () => {
    expect(
      grubInstallArgs({
        bootMode: "uefi",
        disk: "/dev/vda",
        bootDirectory: "/boot",
        efiDirectory: "/boot/efi",
      }),
    ).toEqual([
      "--target=x86_64-efi",
      "--efi-directory=/boot/efi",
      "--removable",
      "--no-nvram",
      "--boot-directory=/boot",
      "--recheck",
    ]);
  });

  it("a generated grub.cfg finds the root by filesystem UUID and boots the kernel with a serial console", () => {
    const cfg = minimalGrubConfig({
      fsUuid: "1234-abcd",
      kernel: "/boot/vmlinuz-6.1",
      initrd: "/boot/initrd.img-6.1",
    });
    expect(cfg).toContain("search --no-floppy --fs-uuid --set=root 1234-abcd");
    expect(cfg).toContain("linux /boot/vmlinuz-6.1 root=UUID=1234-abcd ro console=tty0 console=ttyS0,115200");
    expect(cfg).toContain("initrd /boot/initrd.img-6.1");
  });

  const dump = [
    "label: gpt",
    "label-id: 8F00225F-4114-6B49-855E-5D4CD19FBAD2",
    "device: /dev/vda",
    "unit: sectors",
    "first-lba: 2048",
    "last-lba: 131038",
    "sector-size: 512",
    "",
    '/dev/vda1 : start=        2048, size=       81920, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, uuid=D2ABFF21-161C-9C46-8773-D122E0838A8F, name="root"',
    "",
  ].join("\n");

  it("adds a BIOS boot partition in the gap before 1 MiB, keeping the partitions as they were", () => {
    const script = withBiosBootPartition(dump);
    expect(script).toContain("first-lba: 34");
    expect(script).not.toContain("first-lba: 2048");
    expect(script).toContain("uuid=D2ABFF21-161C-9C46-8773-D122E0838A8F");
    expect(script).toContain(
      "start=34, size=2014, type=21686148-6449-6E6F-744E-656564454649, name=bios_boot",
    );
  });

  it("refuses when a partition already uses the gap", () => {
    expect(() => withBiosBootPartition(dump.replace("start=        2048", "start=        40"))).toThrow(
      /no room for a BIOS boot partition/,
    );
  });
});

describe("the agent's step lists", () => {
  it("are StepDescriptors with Ironic's priorities", async () => {
    const [CLEAN_STEPS, DEPLOY_STEPS] = [await offeredSteps("clean"), await offeredSteps("deploy")];
    for (const step of [...CLEAN_STEPS, ...DEPLOY_STEPS])
      expect(StepDescriptorSchema.parse(step)).toEqual(step);
    const priorities = (steps: StepDescriptor[]) =>
      Object.fromEntries(steps.map((s) => [`${s.interface}.${s.step}`, s.priority]));
    expect(priorities(CLEAN_STEPS)).toEqual({
      "deploy.burnin_cpu": 0,
      "deploy.burnin_disk": 0,
      "deploy.burnin_memory": 0,
      "deploy.burnin_network": 0,
      "deploy.erase_devices": 0,
      "deploy.erase_devices_metadata": 99,
      "deploy.erase_devices_express": 0,
      "raid.create_configuration": 0,
      "raid.delete_configuration": 0,
      "deploy.smart_check": 0,
    });
    // install_bootloader at 60: the slot of Ironic's deploy.prepare_instance_boot, which installs it
    expect(priorities(DEPLOY_STEPS)).toEqual({
      "deploy.write_image": 80,
      "deploy.install_bootloader": 60,
      "raid.apply_configuration": 0,
    });
  });

  it("get_deploy_steps takes no arguments; create_raid and install_bootloader take a boot mode", () => {
    expect(COMMAND_ARGS.get_deploy_steps.safeParse({}).success).toBe(true);
    expect(parseCommandArgs("get_deploy_steps", { x: 1 }).ok).toBe(false);
    expect(parseCommandArgs("create_raid", { logical_disks: [], boot_mode: "bios" }).ok).toBe(false);
    expect(
      parseCommandArgs("create_raid", {
        logical_disks: [{ size_gb: "MAX", raid_level: "1", controller: "software" }],
        boot_mode: "uefi",
      }).ok,
    ).toBe(true);
    expect(parseCommandArgs("install_bootloader", { boot_mode: "bios", root_uuid: "abcd" }).ok).toBe(true);
    expect(parseCommandArgs("install_bootloader", { boot_mode: "pxe" }).ok).toBe(false);
  });
});
