import { readFile } from "node:fs/promises";
import { sysfsBlockDir } from "../disk/device-node.ts";
import type { ExecResult } from "../../shared/system/exec.ts";
import { exec } from "../../shared/system/exec.ts";
import type { ToolCall } from "./disk-tools.ts";

/** A run that may be told to stop early (SIGINT after `stopAfterMs`), keeping what it reported so far. */
export interface StoppableCall extends ToolCall {
  stopAfterMs?: number;
}

/**
 * The burn-in tools (IPA's burnin.py): stress-ng for the cpu and vm stressors, fio for disks and the network,
 * and e2fsprogs' badblocks for disks where there is no fio (the arm64 ramdisk).
 * Linux runs Debian's binaries (the ramdisk carries them); the simulated machine answers as they would.
 */
export interface BurninTools {
  /** Runs stress-ng with these arguments. @throws Error when there is no stress-ng here. */
  stressNg(args: readonly string[], options: ToolCall): Promise<ExecResult>;
  /** Runs fio with these arguments. @throws Error (code ENOENT) when there is no fio here. */
  fio(args: readonly string[], options: ToolCall): Promise<ExecResult>;
  /**
   * Runs badblocks with these arguments; after `stopAfterMs` it is interrupted (SIGINT: it prints the block it
   * reached and exits) and its output so far is the result.
   * @throws Error when there is no badblocks here; ExecTimeoutError past timeoutMs; the signal's reason.
   */
  badblocks(args: readonly string[], options: StoppableCall): Promise<ExecResult>;
  /**
   * The I/O requests the disks (device paths) have completed since boot, reads and writes together; null
   * where that cannot be read. Only its changes mean anything: burnin_disk's stall watch compares them.
   */
  ioCompleted(devices: readonly string[]): Promise<number | null>;
}

export class LinuxBurninTools implements BurninTools {
  stressNg(args: readonly string[], options: ToolCall): Promise<ExecResult> {
    return exec("stress-ng", args, options);
  }

  fio(args: readonly string[], options: ToolCall): Promise<ExecResult> {
    return exec("fio", args, options);
  }

  badblocks(args: readonly string[], options: StoppableCall): Promise<ExecResult> {
    return exec("badblocks", args, options);
  }

  async ioCompleted(devices: readonly string[]): Promise<number | null> {
    let total = 0;
    for (const device of devices) {
      try {
        const { dir } = await sysfsBlockDir(device);
        const fields = (await readFile(`${dir}/stat`, "utf8")).trim().split(/\s+/);
        // Documentation/block/stat.rst: field 1 is reads completed, field 5 writes completed
        const completed = Number(fields[0]) + Number(fields[4]);
        if (!Number.isFinite(completed)) return null;
        total += completed;
      } catch {
        return null;
      }
    }
    return total;
  }
}
