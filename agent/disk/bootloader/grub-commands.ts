/**
 * The argv of every GRUB call install_bootloader makes, built without I/O so each is unit-tested.
 * GRUB's core image must read the root filesystem from wherever it is: a GPT or MBR partition, maybe
 * inside an md array (mdraid1x) that is itself partitioned.
 */

export type BootMode = "bios" | "uefi";

/** Modules baked into core.img so it can find /boot/grub on any layout Anvil writes. */
export const CORE_MODULES = ["part_gpt", "part_msdos", "diskfilter", "mdraid1x", "ext2", "xfs", "btrfs"];

export interface GrubInstallRequest {
  bootMode: BootMode;
  /** The disk whose boot sector (BIOS) gets GRUB; ignored for UEFI. */
  disk: string;
  /** Where /boot/grub goes: the mounted root's /boot (ramdisk GRUB) or "/boot" (the image's, in a chroot). */
  bootDirectory: string;
  /** The mounted ESP (UEFI). */
  efiDirectory?: string;
  /** The ramdisk's GRUB needs the module list; an image's own GRUB knows its layout from its config. */
  modules?: readonly string[];
}

/**
 * grub-install for one disk (BIOS) or one ESP (UEFI). UEFI installs to the removable-media path
 * (\EFI\BOOT\BOOTX64.EFI) without touching NVRAM: every ESP then boots on its own, whichever disk survives.
 */
export function grubInstallArgs(request: GrubInstallRequest): string[] {
  const args =
    request.bootMode === "bios"
      ? ["--target=i386-pc"]
      : [
          "--target=x86_64-efi",
          `--efi-directory=${request.efiDirectory ?? "/boot/efi"}`,
          "--removable",
          "--no-nvram",
        ];
  args.push(`--boot-directory=${request.bootDirectory}`, "--recheck");
  if (request.modules !== undefined && request.modules.length > 0)
    args.push(`--modules=${request.modules.join(" ")}`);
  if (request.bootMode === "bios") args.push(request.disk);
  return args;
}

/**
 * A minimal grub.cfg for an image that brings none and has no grub-mkconfig: boot its newest kernel and
 * initrd from the root filesystem found by UUID, console on both the screen and the first serial port.
 */
export function minimalGrubConfig(options: {
  fsUuid: string;
  kernel: string;
  initrd: string | null;
}): string {
  return [
    "# Written by the Anvil agent: the image had no grub.cfg and no grub-mkconfig.",
    "set timeout=1",
    "serial --unit=0 --speed=115200",
    "terminal_input console serial",
    "terminal_output console serial",
    "insmod part_gpt",
    "insmod part_msdos",
    "insmod mdraid1x",
    "insmod ext2",
    `search --no-floppy --fs-uuid --set=root ${options.fsUuid}`,
    'menuentry "Anvil instance" {',
    `  linux ${options.kernel} root=UUID=${options.fsUuid} ro console=tty0 console=ttyS0,115200`,
    ...(options.initrd === null ? [] : [`  initrd ${options.initrd}`]),
    "}",
    "",
  ].join("\n");
}

/** The sfdisk header and line that add a BIOS boot partition in the gap before the first 1 MiB. */
export const BIOS_BOOT_GAP = { start: 34, size: 2014, type: "21686148-6449-6E6F-744E-656564454649" };

/**
 * Rewrites an sfdisk dump so the GPT's first usable sector is 34 and adds a BIOS boot partition in the
 * 1 MiB gap images leave before their first partition (partitions keep their starts, sizes and UUIDs).
 * @throws Error when the gap is already used (a partition starts before sector 2048)
 */
export function withBiosBootPartition(dump: string): string {
  const starts = [...dump.matchAll(/start=\s*(\d+)/g)].map((match) => Number(match[1]));
  if (starts.some((start) => start < BIOS_BOOT_GAP.start + BIOS_BOOT_GAP.size)) {
    throw new Error("no room for a BIOS boot partition before the first partition");
  }
  const lines = dump
    .split("\n")
    .filter((line) => !/^(first-lba|last-lba|device):/.test(line) && line.trim() !== "");
  const header = lines.filter((line) => !line.includes("start="));
  const partitions = lines.filter((line) => line.includes("start="));
  const { start, size, type } = BIOS_BOOT_GAP;
  return [
    ...header,
    "first-lba: 34",
    "",
    ...partitions,
    `start=${start}, size=${size}, type=${type}, name=bios_boot`,
    "",
  ].join("\n");
}
