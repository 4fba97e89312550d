/** Pure formatting of image-write progress: bytes, rates, ETA and the one-line summary. */

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"] as const;

/** 1536 -> "1.5 KiB"; whole bytes below 1 KiB. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return "?";
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  if (unit === 0) return `${Math.round(value)} B`;
  // NOTE: 1023.96 KiB would round to "1024.0 KiB"; move up a unit instead
  if (value.toFixed(1) === "1024.0" && unit < UNITS.length - 1) return `1.0 ${UNITS[unit + 1]}`;
  return `${value.toFixed(1)} ${UNITS[unit]}`;
}

export function formatRate(bytesPerSecond: number): string {
  return `${formatBytes(bytesPerSecond)}/s`;
}

/** Seconds left at the current rate; null when the total is unknown or nothing is moving. */
export function etaSeconds(progress: { done: number; total: number | null; rate: number }): number | null {
  const { done, total, rate } = progress;
  if (total === null || !(rate > 0) || total < done) return null;
  return Math.ceil((total - done) / rate);
}

/** 75 -> "1:15", 3725 -> "1:02:05", null -> "--:--". */
export function formatEta(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds) || seconds < 0) return "--:--";
  const s = Math.round(seconds);
  const hours = Math.floor(s / 3600);
  const minutes = Math.floor((s % 3600) / 60);
  const secs = String(s % 60).padStart(2, "0");
  if (hours > 0) return `${hours}:${String(minutes).padStart(2, "0")}:${secs}`;
  return `${minutes}:${secs}`;
}

/** Whole percent, clamped to 0..100; null when the total is unknown. */
export function percentOf(done: number, total: number | null): number | null {
  if (total === null || total <= 0) return null;
  return Math.min(100, Math.max(0, Math.floor((done / total) * 100)));
}

export interface ProgressReport {
  step?: string | undefined;
  bytes_done?: number | undefined;
  bytes_total?: number | null | undefined;
  rate_bps?: number | undefined;
}

/** "write_image  1.5 GiB / 4.0 GiB  37%  85.0 MiB/s  ETA 0:31" (unknown totals drop %, ETA). */
export function formatProgress(report: ProgressReport): string {
  const done = report.bytes_done ?? 0;
  const total = report.bytes_total ?? null;
  const rate = report.rate_bps ?? 0;
  const parts = [report.step ?? "progress"];
  const pct = percentOf(done, total);
  parts.push(total === null ? formatBytes(done) : `${formatBytes(done)} / ${formatBytes(total)}`);
  if (pct !== null) parts.push(`${pct}%`);
  parts.push(formatRate(rate));
  if (total !== null) parts.push(`ETA ${formatEta(etaSeconds({ done, total, rate }))}`);
  return parts.join("  ");
}
