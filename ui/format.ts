/** Human-readable sizes, rates and durations for the dashboard. */

export function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value >= 100 || unit === 0 ? 0 : 1)} ${units[unit]}`;
}

export function duration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "…";
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const m = Math.floor(seconds / 60);
  return m < 60 ? `${m} min ${Math.round(seconds % 60)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

export interface Progress {
  done: number;
  total: number | null;
  rate: number;
}

/** Percent done and time left of a write, when the total is known. */
export function eta(p: Progress): { percent: number | null; left: string } {
  if (!p.total) return { percent: null, left: "…" };
  const percent = Math.min(100, (100 * p.done) / p.total);
  return { percent, left: p.rate > 0 ? duration((p.total - p.done) / p.rate) : "…" };
}
