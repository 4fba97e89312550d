import { z } from "zod";
import type { FioJobResult, StressMetrics } from "../../shared/burnin.ts";

/** Output beyond this many characters is not read (a tool's output is outside input). */
const MAX_OUTPUT = 4 * 1024 * 1024;
const MAX_LINES = 20_000;

const NUMBER = String.raw`(\d{1,15}(?:\.\d{1,6})?)`;
/**
 * One `--metrics-brief` row: stressor, bogo ops, real/usr/sys time, bogo ops/s (real and usr+sys time).
 * stress-ng 0.15 tags these lines `metrc:`, older releases `info:`.
 */
const METRICS_LINE = new RegExp(
  String.raw`^stress-ng: (?:metrc|info): +\[\d{1,10}\] +([a-z][a-z0-9-]{0,31}) +` +
    Array.from({ length: 6 }, () => NUMBER).join(" +") +
    String.raw` *$`,
);
const FAIL_LINE = /^stress-ng: fail: +\[\d{1,10}\] +(.{1,512})$/;

export interface StressOutput {
  metrics: StressMetrics[];
  /** stress-ng's `fail:` lines (a stressor's verification errors, a worker that died). */
  failures: string[];
}

/** Reads stress-ng's `--metrics-brief` output (it writes to stderr). Never throws. */
export function parseStressNg(output: string): StressOutput {
  const metrics: StressMetrics[] = [];
  const failures: string[] = [];
  const lines = output.slice(0, MAX_OUTPUT).split("\n", MAX_LINES);
  for (const raw of lines) {
    const line = raw.replace(/\r$/, "");
    const row = METRICS_LINE.exec(line);
    if (row !== null) {
      const [, stressor, bogoOps, real, , , perSecond] = row;
      metrics.push({
        stressor: stressor!,
        bogo_ops: Number(bogoOps),
        real_time_s: Number(real),
        bogo_ops_per_s: Number(perSecond),
      });
      continue;
    }
    const fail = FAIL_LINE.exec(line);
    if (fail !== null && failures.length < 20) failures.push(fail[1]!);
  }
  return { metrics, failures };
}

const Count = z.number().nonnegative().max(Number.MAX_SAFE_INTEGER);
const Direction = z
  .object({ io_bytes: Count.catch(0), bw: Count.catch(0), iops: Count.catch(0), runtime: Count.catch(0) })
  .loose();
const FioJob = z
  .object({
    jobname: z.string().max(4096),
    error: z.number().int().catch(0),
    total_err: Count.optional().catch(undefined),
    job_runtime: Count.optional().catch(undefined),
    read: Direction,
    write: Direction,
  })
  .loose();
const FioReport = z.object({ jobs: z.array(FioJob).max(4096) }).loose();

/** MB/s (10^6 bytes/s) from the bytes moved in runtime ms, else fio's bandwidth (KiB/s). */
function megabytesPerSecond(direction: z.infer<typeof Direction>): number {
  const bytesPerSecond =
    direction.runtime > 0 ? direction.io_bytes / (direction.runtime / 1000) : direction.bw * 1024;
  return Math.round(bytesPerSecond / 10_000) / 100;
}

/**
 * Reads fio's `--output-format json` report: the JSON object after any lines fio prints first (the net
 * engine's "fio: waiting for connection"). Null when there is no readable report.
 */
export function parseFioJson(stdout: string): FioJobResult[] | null {
  const text = stdout.slice(0, MAX_OUTPUT);
  const start = text.startsWith("{") ? 0 : text.indexOf("\n{") + 1;
  if (start === 0 && !text.startsWith("{")) return null;
  let json: unknown;
  try {
    json = JSON.parse(text.slice(start));
  } catch {
    return null;
  }
  const report = FioReport.safeParse(json);
  if (!report.success) return null;
  return report.data.jobs.map((job) => ({
    name: job.jobname,
    read_bytes: job.read.io_bytes,
    write_bytes: job.write.io_bytes,
    read_mb_s: megabytesPerSecond(job.read),
    write_mb_s: megabytesPerSecond(job.write),
    read_iops: Math.round(job.read.iops),
    write_iops: Math.round(job.write.iops),
    runtime_ms: job.job_runtime ?? Math.max(job.read.runtime, job.write.runtime),
    error: job.error,
    total_errors: job.total_err ?? 0,
  }));
}

/** The last few non-empty lines of a tool's stderr, for an error message. */
export function tail(text: string, lines = 3): string {
  return text
    .slice(-8192)
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line.length > 0)
    .slice(-lines)
    .join(" | ")
    .slice(0, 1024);
}
