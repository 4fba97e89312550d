import { CodedError } from "../../shared/errors.ts";
import type { CommandContext } from "./command.ts";

/**
 * Watches a counter that grows while work makes progress (the I/O a disk completed) and calls `onStall` once
 * when it has not moved for `stallMs`. A counter that cannot be read (null, or a throw) never stalls: the watch
 * only stops work it has seen stand still. Returns the function that ends the watch.
 */
function watchForStall(read: () => Promise<number | null>, stallMs: number, onStall: () => void): () => void {
  // a few looks per stall window, at most one every 10 s on long windows
  const everyMs = Math.min(10_000, Math.max(100, Math.floor(stallMs / 4)));
  let last: number | null = null;
  let movedAt = Date.now();
  let busy = false;
  let stopped = false;
  const look = async (): Promise<void> => {
    const value = await read().catch(() => null);
    if (stopped) return;
    if (value === null || value !== last) {
      last = value;
      movedAt = Date.now();
      return;
    }
    if (Date.now() - movedAt >= stallMs) {
      stop();
      onStall();
    }
  };
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    void look().finally(() => (busy = false));
  }, everyMs);
  timer.unref();
  const stop = (): void => {
    stopped = true;
    clearInterval(timer);
  };
  return stop;
}

/** Thrown by `watchingDisks` when the disks stood still: the step's failure, naming them. */
function diskStall(devices: readonly string[], stallS: number, tool: string): CodedError {
  return new CodedError(
    "COMMAND_FAILED",
    `burnin_disk: no I/O completed on ${devices.join(", ")} for ${stallS} s; ${tool} was stopped ` +
      "(the disk or its controller stopped answering)",
  );
}

/**
 * Runs a burn-in tool over `devices` with a signal that also fires when none of them completes any I/O for
 * `stallS` seconds (counters from the backend). The tool is then stopped, and this rejects with diskStall's
 * error; the step's own abort still rejects with its own reason.
 */
export async function watchingDisks<T>(
  request: { devices: readonly string[]; stallS: number; tool: string },
  context: Pick<CommandContext, "backend" | "signal" | "logger">,
  run: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const { devices, stallS, tool } = request;
  const stalled = new AbortController();
  const endWatch = watchForStall(
    () => context.backend.burnin.ioCompleted(devices),
    stallS * 1000,
    () => stalled.abort(new Error("stalled")),
  );
  try {
    return await run(AbortSignal.any([context.signal, stalled.signal]));
  } catch (error) {
    if (stalled.signal.aborted && !context.signal.aborted) {
      context.logger.warn({ devices, stall_timeout_s: stallS, tool }, "burn-in stopped: no I/O completed");
      throw diskStall(devices, stallS, tool);
    }
    throw error;
  } finally {
    endWatch();
  }
}
