import type { Disk } from "../../shared/inventory.ts";
import type { ExecResult } from "../../shared/system/exec.ts";

/** What an NVMe controller and namespace say about erasing (from `nvme id-ctrl` / `nvme id-ns`). */
export interface NvmeCapabilities {
  /** OACS bit 1: the controller supports Format NVM. */
  format: boolean;
  /** FNA bit 2: a format can do a cryptographic erase (SES=2). */
  cryptoFormat: boolean;
  /** SANICAP bits 0–2: sanitize by crypto erase, block erase, overwrite. */
  sanitize: { crypto: boolean; block: boolean; overwrite: boolean };
  /** The namespace's current LBA format index (a format must keep it), null when unknown. */
  lbaf: number | null;
  /** DLFEAT bits 2:0 = 001: deallocated (discarded) blocks read as zeros. */
  deallocatedReadZero: boolean;
}

/** The ATA security feature set as `hdparm -I` reports it. */
export interface AtaSecurity {
  supported: boolean;
  enabled: boolean;
  locked: boolean;
  frozen: boolean;
  /** The password attempt counter ran out: the drive wants a power cycle. */
  countExpired: boolean;
  enhancedErase: boolean;
  /** The drive's estimates, in minutes (null when it gives none). */
  eraseMinutes: number | null;
  enhancedEraseMinutes: number | null;
}

/** Everything method selection needs to know about one disk. */
export interface DiskCapabilities {
  disk: Disk;
  kind: "file" | "block";
  readOnly: boolean;
  /** A software RAID array (md): erased as a disk of its own, its members left alone. */
  raidArray: boolean;
  /** The disk (or one of its partitions) is a member of a running md array. */
  raidMember: boolean;
  /** DISCARD is supported and the device promises zeros from discarded blocks. */
  discard: { supported: boolean; zeroes: boolean };
  /** WRITE ZEROES is offloaded to the device (sysfs write_zeroes_max_bytes > 0). */
  writeZeroes: boolean;
  nvme: NvmeCapabilities | null;
  ata: AtaSecurity | null;
}

export interface ToolCall {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/**
 * The side effects of erasing that are not plain reads and writes of the disk: probing, discard, and the
 * drive's own erase commands. Linux runs nvme/hdparm/blkdiscard; the simulated machine's disks are files.
 */
export interface DiskTools {
  /** @throws Error when the disk cannot be examined at all (it vanished). */
  capabilities(disk: Disk, signal?: AbortSignal): Promise<DiskCapabilities>;
  /** Discards the whole device (zeroOut: WRITE ZEROES instead). @throws Error naming the tool's complaint. */
  discard(device: string, options: ToolCall & { zeroOut: boolean }): Promise<void>;
  /** Runs nvme-cli with these arguments. @throws Error when there is no nvme-cli here. */
  nvme(args: readonly string[], options: ToolCall): Promise<ExecResult>;
  /** Runs hdparm with these arguments. @throws Error when there is no hdparm here. */
  hdparm(args: readonly string[], options: ToolCall): Promise<ExecResult>;
  /** Runs smartctl (smartmontools) with these arguments. @throws Error when there is no smartctl here. */
  smartctl(args: readonly string[], options: ToolCall): Promise<ExecResult>;
}
