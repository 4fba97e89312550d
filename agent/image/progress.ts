import type { Checkpoint, ImageProgress } from "../../shared/image.ts";

/** Turns a growing byte count into throttled progress reports (at most one per interval, plus the last). */
export class ProgressMeter {
  private readonly started = Date.now();
  private lastReport = 0;
  private bytes = 0;

  constructor(
    private readonly report: ((progress: ImageProgress) => void) | undefined,
    private readonly intervalMs = 1_000,
  ) {}

  total: number | null = null;

  update(bytesDone: number): void {
    this.bytes = bytesDone;
    const now = Date.now();
    if (this.report && now - this.lastReport >= this.intervalMs) {
      this.lastReport = now;
      this.report(this.snapshot(now));
    }
  }

  /** A report now, whatever the interval, carrying a durable checkpoint. */
  checkpoint(checkpoint: Checkpoint): void {
    this.report?.({ ...this.snapshot(Date.now()), checkpoint });
  }

  finish(): void {
    this.report?.(this.snapshot(Date.now()));
  }

  private snapshot(now: number): ImageProgress {
    const seconds = Math.max(now - this.started, 1) / 1000;
    return { bytes_done: this.bytes, bytes_total: this.total, rate_bps: Math.round(this.bytes / seconds) };
  }
}
