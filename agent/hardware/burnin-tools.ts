import type { ExecResult } from "../../shared/system/exec.ts";
import { exec } from "../../shared/system/exec.ts";
import type { ToolCall } from "./disk-tools.ts";

/**
 * The burn-in tools (IPA's burnin.py): stress-ng for the cpu and vm stressors, fio for disks and the network.
 * Linux runs Debian's binaries (the ramdisk carries them); the simulated machine answers as they would.
 */
export interface BurninTools {
  /** Runs stress-ng with these arguments. @throws Error when there is no stress-ng here. */
  stressNg(args: readonly string[], options: ToolCall): Promise<ExecResult>;
  /** Runs fio with these arguments. @throws Error when there is no fio here. */
  fio(args: readonly string[], options: ToolCall): Promise<ExecResult>;
}

export class LinuxBurninTools implements BurninTools {
  stressNg(args: readonly string[], options: ToolCall): Promise<ExecResult> {
    return exec("stress-ng", args, options);
  }

  fio(args: readonly string[], options: ToolCall): Promise<ExecResult> {
    return exec("fio", args, options);
  }
}
