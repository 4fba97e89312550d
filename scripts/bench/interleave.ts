// Baseline-against-this-checkout comparisons for the benches, run as interleaved rounds: round 1 measures the
// baseline first, round 2 this checkout first, and so on (AB, BA, AB, …), so that load drift on a shared machine
// hits both sides alike. Each figure is printed per round, then as the median of each side and the median of the
// per-round ratios, with the load average the rounds saw.
import { execFileSync } from "node:child_process";
import { mkdirSync, symlinkSync } from "node:fs";
import { join, resolve } from "node:path";
import { loadavg } from "node:os";

/** One figure a bench compares: how to read it from a result and how to print it. */
export interface Figure<R> {
  name: string;
  unit: string;
  digits: number;
  of: (result: R) => number;
}

/** One round: both sides' results and the 1-minute load average before and after it. */
export interface PairedRound<R> {
  base: R;
  here: R;
  load: [number, number];
}

/** The 1-minute load average now. */
export const loadNow = (): number => loadavg()[0] ?? NaN;

/** Prints the three load averages with a label (the bench's start and end). */
export function printLoad(label: string): void {
  const [one, five, fifteen] = loadavg().map((n) => n.toFixed(2));
  console.log(`load average ${label}: ${one}, ${five}, ${fifteen} (1, 5, 15 min)`);
}

/** The order in which round `round` (0-based) measures `sides`: as given on even rounds, reversed on odd ones. */
export function roundOrder<T>(sides: readonly T[], round: number): T[] {
  return round % 2 === 0 ? [...sides] : [...sides].reverse();
}

/** The median of `values` (the mean of the middle two for an even count); NaN when there are none. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** A summary row: each side's median, the median per-round ratio (this / baseline), rounds and load range. */
export interface Summary {
  name: string;
  unit: string;
  base: string;
  here: string;
  ratio: number;
  ratios: number[];
  rounds: number;
  load: string;
}

/**
 * Prints every figure round by round (baseline → this checkout, ×ratio), then the summary, as text and as a
 * Markdown table (figure, baseline, now, ratio, rounds, load) ready for docs/performance.md. Returns the rows.
 */
export function compareRounds<R>(
  figures: readonly Figure<R>[],
  rounds: readonly PairedRound<R>[],
  labels: { title: string; baseline: string },
): Summary[] {
  const { title, baseline } = labels;
  console.log(
    `\n== ${title}: baseline ${baseline} → this checkout, ${rounds.length} interleaved round(s) ==`,
  );
  const fmt = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : "-");
  const loads = rounds.flatMap((r) => r.load);
  const load = `${fmt(Math.min(...loads), 1)}–${fmt(Math.max(...loads), 1)}`;
  const rows: Summary[] = [];
  for (const f of figures) {
    const ratios = rounds.map((r) => f.of(r.here) / f.of(r.base));
    const perRound = rounds
      .map((r, i) => `${fmt(f.of(r.base), f.digits)}→${fmt(f.of(r.here), f.digits)} ×${fmt(ratios[i]!, 2)}`)
      .join(" | ");
    console.log(`${f.name.padEnd(28)} ${f.unit.padEnd(5)} ${perRound}`);
    rows.push({
      name: f.name,
      unit: f.unit,
      base: fmt(median(rounds.map((r) => f.of(r.base))), f.digits),
      here: fmt(median(rounds.map((r) => f.of(r.here))), f.digits),
      ratio: median(ratios),
      ratios,
      rounds: rounds.length,
      load,
    });
  }
  console.log(`\nmedians (ratio = median of the per-round ratios, this checkout / baseline):`);
  for (const r of rows)
    console.log(
      `${r.name.padEnd(28)} ${r.base.padStart(9)} → ${r.here.padStart(9)} ${r.unit.padEnd(5)} ×${fmt(r.ratio, 2)} (range ×${fmt(Math.min(...r.ratios), 2)}–${fmt(Math.max(...r.ratios), 2)})`,
    );
  console.log(`\n| figure | ${baseline} | now | ratio | rounds | load |\n|---|---|---|---|---|---|`);
  for (const r of rows)
    console.log(
      `| ${r.name} (${r.unit}) | ${r.base} | ${r.here} | ×${fmt(r.ratio, 2)} (×${fmt(Math.min(...r.ratios), 2)}–${fmt(Math.max(...r.ratios), 2)}) | ${r.rounds} | ${r.load} |`,
    );
  return rows;
}

/**
 * The sides a bench measures: this checkout, and before it `rev` extracted into `dir`/baseline with `git archive`
 * (its own code, this checkout's `node_modules` linked) when a baseline is asked for.
 */
export function benchCheckouts(dir: string, rev: string | undefined): [string, string][] {
  const checkouts: [string, string][] = [["this checkout", resolve(".")]];
  if (rev) {
    const base = join(dir, "baseline");
    mkdirSync(base);
    execFileSync("bash", ["-c", 'git archive "$1" | tar -x -C "$2"', "bash", rev, base]);
    symlinkSync(resolve("node_modules"), join(base, "node_modules"));
    checkouts.unshift([`baseline ${rev}`, base]);
  }
  return checkouts;
}
