/**
 * Garbage collection when the conductor goes quiet after a burst of work (a young-generation collection as the
 * quiet starts, a full one ~6 s later), so the memory the burst made V8 commit goes back to the system instead of
 * staying resident until the next burst.
 *
 * NOTE: V8 grows the young generation to its maximum (two 16 MiB semi-spaces) under a burst of requests and keeps
 * the old generation's pages after it; its own memory reducer runs again only when the old generation has grown
 * by 10 % and 10 MiB since its last run, so after 10,000 creates and a few list pages the process stayed at
 * 145-174 MiB while idle (72 MiB of heap committed, 30 MiB of it live). A full GC once the allocation
 * rate has been low for >= 5 s also shrinks the young generation (V8 does that in a GC when the allocation since the
 * previous GC was slower than 1 KB/ms; the minor collection as the quiet starts makes the full one's window the
 * quiet one), which took the same process from 153 to 108 MiB, in 25-35 ms of main-thread time.
 */
import { getHeapStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { performance, type EventLoopUtilization } from "node:perf_hooks";
import type { Logger } from "../shared/log.ts";

/** When a compaction is due; every figure has a default (the measured one). */
export interface IdleCompactionPolicy {
  /** Heap committed above the last floor, in bytes, that makes a compaction worth its pause (16 MiB). */
  growthBytes: number;
  /** Quiet checks between the minor collection that opens the quiet window and the full one (6: ~6 s). */
  quietChecks: number;
  /** Event-loop utilisation below which a check counts as quiet (0.05). */
  quietUtilization: number;
}

export const DEFAULT_IDLE_COMPACTION: IdleCompactionPolicy = {
  growthBytes: 16 * 1024 * 1024,
  quietChecks: 6,
  quietUtilization: 0.05,
};

/** What one check saw: the heap V8 has committed, and how busy the event loop was since the last check. */
export interface IdleSample {
  committedBytes: number;
  utilization: number;
}

/** What a check asks for: nothing, a young-generation collection, or a full one. */
export type IdleAction = "none" | "minor" | "full";

/**
 * The decision alone (no timers, no V8): feed it one sample per check. Once the heap has grown and a check is
 * quiet, it asks for a minor collection (it opens the quiet window: V8 gives the young generation back only when
 * the allocation since the previous collection was slow, < 1 KB/ms over >= 5 s), then, after `quietChecks` more
 * quiet checks, for the full one; a busy check closes the window. `compacted` takes the committed heap after the
 * full collection as the new floor; the floor also follows the heap down whenever it shrinks on its own, so a
 * compaction only follows growth since the lowest point seen after the first one.
 */
export class IdleCompactionGate {
  /**
   * The committed heap after the last full collection, lower if V8 shrank it since. It starts at 0: the heap at
   * the first check may already be a burst's (the API takes requests as soon as it listens), so the first quiet
   * spell after start compacts once whatever the heap is, and sets the floor.
   */
  private floor = 0;
  /** Quiet checks since the window's minor collection; undefined while no window is open. */
  private quietSinceMinor: number | undefined;

  constructor(private readonly policy: IdleCompactionPolicy = DEFAULT_IDLE_COMPACTION) {}

  check(sample: IdleSample): IdleAction {
    if (sample.committedBytes < this.floor) this.floor = sample.committedBytes;
    if (sample.utilization >= this.policy.quietUtilization) {
      this.quietSinceMinor = undefined;
      return "none";
    }
    if (sample.committedBytes < this.floor + this.policy.growthBytes) return "none";
    if (this.quietSinceMinor === undefined) {
      this.quietSinceMinor = 0;
      return "minor";
    }
    this.quietSinceMinor++;
    return this.quietSinceMinor >= this.policy.quietChecks ? "full" : "none";
  }

  compacted(committedBytes: number): void {
    this.floor = committedBytes;
    this.quietSinceMinor = undefined;
  }
}

/** V8's `gc` function: a full collection, or a young-generation one with `{ type: "minor" }`. */
export type Collect = (options?: { type: "minor" | "major" }) => void;

/**
 * V8's collection as a function, without `--expose-gc` on the command line: the flag is turned on only for
 * the time it takes to create one context (V8 installs `gc` in contexts made while it is set) and off again, so
 * no other context, the conductor's own included, gets a global `gc`. A process started with `--expose-gc` uses
 * its own.
 */
export function v8Collection(): Collect {
  const own: unknown = (globalThis as { gc?: unknown }).gc;
  if (typeof own === "function") return own as Collect;
  setFlagsFromString("--expose-gc");
  try {
    return runInNewContext("gc") as Collect;
  } finally {
    setFlagsFromString("--no-expose-gc");
  }
}

/** What startIdleCompaction() reads and calls; each defaults to the real one (V8's heap, the event loop, `gc`). */
export interface IdleCompactionHooks {
  policy?: IdleCompactionPolicy;
  /** One sample per check (default: V8's committed heap and the event loop's utilisation since the last check). */
  sample?: () => IdleSample;
  /** The collection (default: v8Collection(), made at the first one). */
  collect?: Collect;
  /** Milliseconds between checks (1,000). */
  checkMs?: number;
}

/** V8's committed heap and the event loop's utilisation since the previous call. */
function liveSampler(): () => IdleSample {
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, last);
    last = now;
    return { committedBytes: getHeapStatistics().total_heap_size, utilization };
  };
}

/**
 * Checks once a second (an unref'd timer: it never keeps the process alive) and collects when the gate says so;
 * logs each full collection at debug level. Returns the stop function.
 */
export function startIdleCompaction(logger: Logger, hooks: IdleCompactionHooks = {}): () => void {
  const gate = new IdleCompactionGate(hooks.policy);
  const sample = hooks.sample ?? liveSampler();
  let collect = hooks.collect;
  const timer = setInterval(() => {
    const before = sample();
    const action = gate.check(before);
    if (action === "none") return;
    collect ??= v8Collection();
    if (action === "minor") return collect({ type: "minor" });
    const started = performance.now();
    collect();
    const after = sample().committedBytes;
    gate.compacted(after);
    logger.debug(
      {
        heap_before_mib: Math.round(before.committedBytes / 1048576),
        heap_after_mib: Math.round(after / 1048576),
        ms: Math.round(performance.now() - started),
      },
      "idle: heap compacted",
    );
  }, hooks.checkMs ?? 1000);
  timer.unref();
  return () => clearInterval(timer);
}
