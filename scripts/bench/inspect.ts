/**
 * Benchmarks `anvil-agent inspect` (the built single executable): its size, start-to-inventory time and
 * peak RSS, against the same command run from source. Prints numbers and ratios; asserts nothing.
 * Usage: node --import tsx scripts/bench/inspect.ts [--runs 10]
 */
import { access, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { exec } from "../../shared/system/exec.ts";

const ROOT = resolve(import.meta.dirname, "../..");
const EXECUTABLE = join(ROOT, "build/anvil-agent");
const GNU_TIME = "/usr/bin/time";

interface Run {
  wallMs: number;
  maxRssKiB: number | null;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: "string", default: "10" } } });
  const runs = Number(values.runs);
  const build = await exec(process.execPath, ["--import", "tsx", "scripts/build/agent.ts", "--if-stale"], {
    cwd: ROOT,
    timeoutMs: 300_000,
  });
  if (build.code !== 0) throw new Error(`build failed: ${build.stderr}`);
  const haveTime = await access(GNU_TIME).then(
    () => true,
    () => false,
  );
  const sea = await measure({ argv: [EXECUTABLE, "inspect"], runs, haveTime });
  const source = await measure({
    argv: [process.execPath, "--import", "tsx", join(ROOT, "agent/main.ts"), "inspect"],
    runs: Math.min(runs, 5),
    haveTime,
  });
  const size = (await stat(EXECUTABLE)).size;
  const report = {
    executable_bytes: size,
    executable_mib: +(size / 1024 / 1024).toFixed(1),
    sea: summarise(sea),
    from_source: summarise(source),
    goal_inspect_under_1s: summarise(sea).median_ms < 1000,
    speedup_vs_source: +(summarise(source).median_ms / summarise(sea).median_ms).toFixed(2),
  };
  process.stdout.write(JSON.stringify(report, null, 2) + "\n");
}

async function measure(options: { argv: string[]; runs: number; haveTime: boolean }): Promise<Run[]> {
  const results: Run[] = [];
  for (let i = 0; i < options.runs; i++) {
    const [command, ...args] = options.haveTime
      ? [GNU_TIME, "-f", "MAXRSS %M", ...options.argv]
      : options.argv;
    const started = process.hrtime.bigint();
    const result = await exec(command as string, args, { cwd: ROOT, timeoutMs: 60_000 });
    const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
    if (result.code !== 0)
      throw new Error(`${options.argv.join(" ")} exited ${result.code}: ${result.stderr}`);
    JSON.parse(result.stdout); // it must have printed a whole inventory
    const rss = /MAXRSS (\d+)/.exec(result.stderr)?.[1];
    results.push({ wallMs, maxRssKiB: rss === undefined ? null : Number(rss) });
  }
  return results;
}

function summarise(runs: Run[]): {
  runs: number;
  median_ms: number;
  min_ms: number;
  peak_rss_mib: number | null;
} {
  const times = runs.map((run) => run.wallMs).sort((a, b) => a - b);
  const rss = runs.map((run) => run.maxRssKiB).filter((value): value is number => value !== null);
  return {
    runs: runs.length,
    median_ms: +(times[Math.floor(times.length / 2)] ?? 0).toFixed(1),
    min_ms: +(times[0] ?? 0).toFixed(1),
    peak_rss_mib: rss.length === 0 ? null : +(Math.max(...rss) / 1024).toFixed(1),
  };
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:inspect failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
