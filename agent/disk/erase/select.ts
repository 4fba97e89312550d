import type { EraseMethod, EraseOptions, SkipBlockDevice } from "../../../shared/erase.ts";
import { matchesHints } from "../../../shared/root-device.ts";
import type { DiskCapabilities } from "../../hardware/disk-tools.ts";

/** erase_devices ("full"), erase_devices_express, erase_devices_metadata. */
export type EraseMode = "full" | "express" | "metadata";

/** One method to try; `onFailure: "next"` lets the following attempt run when this one fails. */
export interface EraseAttempt {
  method: EraseMethod;
  onFailure: "next" | "fail";
}

export type ErasePlan =
  | { action: "skip"; reason: string }
  | { action: "fail"; reason: string }
  /** `passedOver` says why better methods were not chosen (for the log and the result). */
  | { action: "erase"; attempts: EraseAttempt[]; passedOver: string[] };

export interface SelectionInput {
  mode: EraseMode;
  options: EraseOptions;
}

/**
 * How to erase one disk: a pure function of what the disk can do and what the operator allows, so every
 * branch is testable with fake disks. Firmware methods come first (fastest, and they reach remapped and
 * over-provisioned blocks software cannot), then a discard the device promises reads back as zeros, then
 * overwriting. Without `continue_if_disk_secure_erase_fails` a failed firmware erase fails the disk, as
 * in Ironic; express mode always falls back to the metadata erase, as IPA's erase_devices_express.
 * @throws Error when a skip_block_devices hint cannot be parsed (a bad operator)
 */
export function selectErase(caps: DiskCapabilities, input: SelectionInput): ErasePlan {
  const { mode, options } = input;
  if (listedInSkip(caps, options.skip_block_devices)) {
    return { action: "skip", reason: "listed in the node's skip_block_devices" };
  }
  // As IPA's _list_erasable_devices / erase_block_device: a RAID member is left alone and the array itself
  // is erased like a disk, so cleaning keeps the RAID (raid.delete_configuration is what removes it).
  if (caps.raidMember) {
    return {
      action: "skip",
      reason:
        "a software RAID member: the array on it is erased instead (raid.delete_configuration removes the RAID)",
    };
  }
  if (caps.readOnly) {
    if (mode !== "full" || options.erase_skip_read_only)
      return { action: "skip", reason: "read-only device" };
    return {
      action: "fail",
      reason: "the device is read-only (set erase_skip_read_only to skip read-only devices)",
    };
  }
  if (mode === "metadata")
    return { action: "erase", attempts: [{ method: "metadata", onFailure: "fail" }], passedOver: [] };
  const passedOver: string[] = [];
  const firmware = firmwareMethod(caps, { options, passedOver, express: mode === "express" });
  const zeroing = zeroingMethod(caps, { options, passedOver });
  if (mode === "express") {
    const fast = firmware ?? zeroing;
    const attempts: EraseAttempt[] = fast === null ? [] : [{ method: fast, onFailure: "next" }];
    return {
      action: "erase",
      attempts: [...attempts, { method: "metadata", onFailure: "fail" }],
      passedOver,
    };
  }
  const software: EraseAttempt[] = [];
  if (zeroing !== null) software.push({ method: zeroing, onFailure: "next" });
  if (options.shred_random_overwrite_iterations > 0 || options.shred_final_overwrite_with_zeros) {
    software.push({ method: "overwrite", onFailure: "fail" });
  } else {
    passedOver.push(
      "overwrite: shred_random_overwrite_iterations is 0 and shred_final_overwrite_with_zeros is false",
    );
  }
  const last = software.at(-1);
  if (last) last.onFailure = "fail";
  if (firmware !== null) {
    const fallBack = options.continue_if_disk_secure_erase_fails && software.length > 0;
    const attempts: EraseAttempt[] = [{ method: firmware, onFailure: fallBack ? "next" : "fail" }];
    return { action: "erase", attempts: fallBack ? [...attempts, ...software] : attempts, passedOver };
  }
  if (software.length === 0) {
    return { action: "fail", reason: `no erase method is available (${passedOver.join("; ")})` };
  }
  return { action: "erase", attempts: software, passedOver };
}

function listedInSkip(caps: DiskCapabilities, skip: readonly SkipBlockDevice[] | undefined): boolean {
  return (skip ?? []).some(
    (hint) => !("volume_name" in hint) && Object.keys(hint).length > 0 && matchesHints(caps.disk, hint),
  );
}

interface Notes {
  options: EraseOptions;
  passedOver: string[];
}

function firmwareMethod(caps: DiskCapabilities, notes: Notes & { express: boolean }): EraseMethod | null {
  const { options, passedOver } = notes;
  if (caps.nvme) {
    if (!options.enable_nvme_secure_erase)
      passedOver.push("NVMe secure erase: disabled (enable_nvme_secure_erase)");
    else {
      const method = nvmeMethod(caps.nvme);
      if (method !== null) return method;
      passedOver.push("NVMe secure erase: the controller supports neither format nor sanitize");
    }
  }
  const ata = caps.ata;
  if (ata) {
    const why = ataUnusable(caps, notes);
    if (why === null) return ata.enhancedErase ? "ata_secure_erase_enhanced" : "ata_secure_erase";
    passedOver.push(`ATA secure erase: ${why}`);
  }
  return null;
}

/** Crypto erase first (seconds, and it covers every block), then block erase, then the slow overwrite. */
function nvmeMethod(nvme: NonNullable<DiskCapabilities["nvme"]>): EraseMethod | null {
  if (nvme.sanitize.crypto) return "nvme_sanitize_crypto";
  if (nvme.format && nvme.cryptoFormat) return "nvme_format_crypto";
  if (nvme.sanitize.block) return "nvme_sanitize_block";
  if (nvme.format) return "nvme_format_user_data";
  if (nvme.sanitize.overwrite) return "nvme_sanitize_overwrite";
  return null;
}

function ataUnusable(caps: DiskCapabilities, notes: Notes & { express: boolean }): string | null {
  const ata = caps.ata;
  if (ata === null) return "no ATA security feature set";
  if (!notes.options.enable_ata_secure_erase) return "disabled (enable_ata_secure_erase)";
  if (!ata.supported) return "the drive does not support the security feature set";
  if (ata.frozen)
    return "the drive's security is frozen (the firmware froze it at boot; a suspend/resume or hot-plug unfreezes it)";
  if (ata.locked) return "the drive is locked with a password this agent does not know";
  if (ata.countExpired) return "the drive's password attempt counter expired (power-cycle it)";
  // A spinning disk's secure erase writes every sector: hours, not the express step's seconds.
  if (notes.express && caps.disk.rotational) return "a rotational drive's erase is not express";
  return null;
}

function zeroingMethod(caps: DiskCapabilities, notes: Notes): EraseMethod | null {
  const { options, passedOver } = notes;
  if (!options.enable_discard) {
    passedOver.push("discard: disabled (enable_discard)");
    return null;
  }
  if (caps.discard.supported && caps.discard.zeroes) return "discard";
  // A spinning disk's WRITE ZEROES is a WRITE SAME of every sector: hours, and no better than overwriting.
  if (caps.writeZeroes && !(caps.disk.rotational && caps.kind === "block")) return "write_zeroes";
  passedOver.push(
    caps.discard.supported
      ? "discard: the device does not promise that discarded blocks read as zeros"
      : "discard: not supported",
  );
  return null;
}
