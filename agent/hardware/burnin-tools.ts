import type { ExecResult } from "../../shared/system/exec.ts";
import { ExecTimeoutError, exec, spawnStreaming } from "../../shared/system/exec.ts";
import type { ToolCall } from "./disk-tools.ts";

/** A run that may be told to stop early (SIGINT after `stopAfterMs`), keeping what it reported so far. */
export interface StoppableCall extends ToolCall {
  stopAfterMs?: number;
}

/**
 * The burn-in tools (IPA's burnin.py): stress-ng for the cpu and vm stressors, fio for disks and the network,
 * and e2fsprogs' badblocks for disks where fio is not carried (the ramdisk).
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
}

/**
 * Runs a program as exec does, but sends SIGINT after `stopAfterMs` and still resolves with its output: the
 * way a time-bounded badblocks ends. Abort and timeoutMs kill it (SIGKILL) and reject, as exec.
 */
function runStoppable(command: string, args: readonly string[], options: StoppableCall): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    if (options.signal?.aborted) {
      reject(options.signal.reason ?? new Error("aborted"));
      return;
    }
    const child = spawnStreaming(command, args);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let settled = false;
    const timers: NodeJS.Timeout[] = [];
    const finish = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      timers.forEach(clearTimeout);
      options.signal?.removeEventListener("abort", onAbort);
      fn();
    };
    const onAbort = (): void => {
      child.kill("SIGKILL");
      finish(() => reject(options.signal?.reason ?? new Error("aborted")));
    };
    if (options.stopAfterMs !== undefined) {
      timers.push(setTimeout(() => child.kill("SIGINT"), options.stopAfterMs));
    }
    if (options.timeoutMs !== undefined) {
      const timeoutMs = options.timeoutMs;
      timers.push(
        setTimeout(() => {
          child.kill("SIGKILL");
          finish(() => reject(new ExecTimeoutError(command, timeoutMs)));
        }, timeoutMs),
      );
    }
    options.signal?.addEventListener("abort", onAbort, { once: true });
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => err.push(chunk));
    child.on("error", (error) => finish(() => reject(error)));
    child.on("close", (code, signal) =>
      finish(() =>
        resolve({
          code,
          signal,
          stdout: Buffer.concat(out).toString(),
          stderr: Buffer.concat(err).toString(),
        }),
      ),
    );
    child.stdin.on("error", () => undefined);
    child.stdin.end();
  });
}

export class LinuxBurninTools implements BurninTools {
  stressNg(args: readonly string[], options: ToolCall): Promise<ExecResult> {
    return exec("stress-ng", args, options);
  }

  fio(args: readonly string[], options: ToolCall): Promise<ExecResult> {
    return exec("fio", args, options);
  }

  badblocks(args: readonly string[], options: StoppableCall): Promise<ExecResult> {
    return runStoppable("badblocks", args, options);
  }
}
