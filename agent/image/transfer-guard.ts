import { ImageError } from "./errors.ts";

/** How slow an image download may be before it is given up (defaults suit real deployments). */
export interface TransferLimits {
  /** Bytes per second the server must average over each `rateWindowMs` of waiting for it. Default 64 KiB/s. */
  minBytesPerSecond: number;
  /** The window the minimum rate is averaged over. Default 60 s. */
  rateWindowMs: number;
  /** The whole download's deadline. Default: its size at the minimum rate plus `deadlineSlackMs` (none while the size is unknown). */
  deadlineMs?: number;
  /** Added to the size-derived deadline, for connects, retries and slow starts. Default 5 min. */
  deadlineSlackMs: number;
}

export const TRANSFER_DEFAULTS: TransferLimits = {
  minBytesPerSecond: 64 * 1024,
  rateWindowMs: 60_000,
  deadlineSlackMs: 300_000,
};

/** One measurement point: network time waited so far and bytes received by then. */
interface Sample {
  waitedMs: number;
  bytes: number;
}

/**
 * Bounds one download's speed: a server that drips (one byte every second never trips the stall timeout)
 * fails once a window of waiting for it brought less than the minimum rate, and the whole download has a
 * deadline. The rate counts only time spent waiting for the server, never time the consumer (a slow disk,
 * a decompressor) held the download back, so a slow writer is not blamed on the server.
 * Pure but for the clock it is given.
 */
export class TransferGuard {
  private waitedMs = 0;
  private bytes = 0;
  private readonly samples: Sample[] = [{ waitedMs: 0, bytes: 0 }];
  private readonly started: number;

  constructor(
    private readonly limits: TransferLimits,
    private readonly label: string,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.started = now();
  }

  /** Awaits `pending` (a wait for the server), counting the time it takes as network time. */
  async waitFor<T>(pending: Promise<T>): Promise<T> {
    const from = this.now();
    try {
      return await pending;
    } finally {
      this.waitedMs += this.now() - from;
    }
  }

  /**
   * Counts received bytes and checks both bounds.
   * @throws ImageError "http_stall" naming the rate (or the deadline) that was missed
   */
  received(bytes: number, total: number | null): void {
    this.bytes += bytes;
    this.checkDeadline(total);
    this.checkRate();
  }

  /** Checks the deadline alone (before a request, when no byte came). @throws as received() */
  checkDeadline(total: number | null): void {
    const { minBytesPerSecond, deadlineSlackMs } = this.limits;
    const deadline =
      this.limits.deadlineMs ??
      (total === null ? undefined : (total / minBytesPerSecond) * 1000 + deadlineSlackMs);
    const elapsed = this.now() - this.started;
    if (deadline === undefined || elapsed <= deadline) return;
    throw new ImageError(
      `download of ${this.label} missed its deadline of ${Math.round(deadline / 1000)} s ` +
        `(${this.bytes} of ${total ?? "?"} bytes after ${Math.round(elapsed / 1000)} s; ` +
        `the minimum rate is ${minBytesPerSecond} B/s)`,
      "http_stall",
    );
  }

  private checkRate(): void {
    const { minBytesPerSecond, rateWindowMs } = this.limits;
    const last = this.samples.at(-1) as Sample;
    // about 60 samples per window keeps the window's edge within a sixtieth of it
    if (this.waitedMs - last.waitedMs >= rateWindowMs / 60) {
      this.samples.push({ waitedMs: this.waitedMs, bytes: this.bytes });
    }
    // the newest sample at least a window ago: everything before it is no longer needed
    let edge = -1;
    for (let i = this.samples.length - 1; i >= 0; i--) {
      if (this.waitedMs - (this.samples[i] as Sample).waitedMs >= rateWindowMs) {
        edge = i;
        break;
      }
    }
    if (edge < 0) return; // less than one window of waiting so far
    this.samples.splice(0, edge);
    const from = this.samples[0] as Sample;
    const rate = ((this.bytes - from.bytes) * 1000) / (this.waitedMs - from.waitedMs);
    if (rate >= minBytesPerSecond) return;
    throw new ImageError(
      `download of ${this.label} is too slow: ${Math.floor(rate)} B/s over the last ` +
        `${((this.waitedMs - from.waitedMs) / 1000).toFixed(1)} s, below the minimum of ${minBytesPerSecond} B/s`,
      "http_stall",
    );
  }
}
