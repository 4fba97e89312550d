import { println, type Sink } from "./output.ts";
import { formatProgress, percentOf, type ProgressReport } from "./progress.ts";

/** Plain (non-TTY) progress lines: at most one per this many percent, or per this long without a total. */
const PLAIN_PERCENT_STEP = 10;
const PLAIN_INTERVAL_MS = 5000;

/** "17:02:03Z" from an ISO time (or now). */
function clock(at?: string): string {
  const date = at ? new Date(at) : new Date();
  return `${(Number.isNaN(date.getTime()) ? new Date() : date).toISOString().slice(11, 19)}Z`;
}

/**
 * What `wait` shows: one timestamped line per state change, and a progress line that is redrawn in
 * place on a terminal and printed now and then otherwise.
 */
export class LiveDisplay {
  private progressShown = false;
  private lastPlainPercent = -1;
  private lastPlainAt = 0;

  constructor(private readonly sink: Sink) {}

  private get tty(): boolean {
    return this.sink.isTTY === true;
  }

  /** Ends a redrawn progress line so the next text starts on its own line. */
  private closeProgress(): void {
    if (this.progressShown && this.tty) this.sink.write("\n");
    this.progressShown = false;
  }

  line(text: string, at?: string): void {
    this.closeProgress();
    println(this.sink, `${clock(at)}  ${text}`);
  }

  progress(report: ProgressReport & { message?: string | undefined }): void {
    if (report.bytes_done === undefined) {
      // a step announcing itself ("writing to /dev/sda"), no bytes yet
      if (report.message) this.line(`${report.step ?? "progress"}: ${report.message}`);
      return;
    }
    const text = formatProgress(report);
    if (this.tty) {
      this.sink.write(`\r\x1b[2K${text}`);
      this.progressShown = true;
      return;
    }
    const done = report.bytes_done ?? 0;
    const total = report.bytes_total ?? null;
    const pct = percentOf(done, total);
    const now = Date.now();
    const stepped =
      pct === null
        ? now - this.lastPlainAt >= PLAIN_INTERVAL_MS
        : Math.floor(pct / PLAIN_PERCENT_STEP) !== Math.floor(this.lastPlainPercent / PLAIN_PERCENT_STEP) ||
          (pct === 100 && this.lastPlainPercent !== 100);
    if (!stepped && this.lastPlainPercent !== -1) return;
    this.lastPlainPercent = pct ?? 0;
    this.lastPlainAt = now;
    println(this.sink, `${clock()}  ${text}`);
  }

  finish(): void {
    this.closeProgress();
  }
}
