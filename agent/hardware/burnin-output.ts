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
 * Reads fio's `--output-format json` report (each job's run time is its longest direction's: with
 * group_reporting fio sums `job_runtime` over the group's jobs, 16 × the wall time for the network test's
 * 16 streams, while a direction's `runtime` is the longest job's, the one its bandwidth is over): the JSON object after any lines fio prints first (the net
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
    runtime_ms: Math.max(job.read.runtime, job.write.runtime) || (job.job_runtime ?? 0),
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

/** What badblocks (e2fsprogs) printed about one run of its write-read-verify test (`-w -v`). */
export interface BadblocksReport {
  /** The block range tested ("From block F to L"), null when badblocks never started testing. */
  first: number | null;
  last: number | null;
  /** Patterns written whole, and read back and compared whole. */
  writesDone: number;
  readsDone: number;
  /** The phase it was in when interrupted ("Interrupted at block N"), with N. */
  interrupted: { phase: "write" | "read"; block: number } | null;
  /** How many bad blocks it listed (on stdout, one number a line), and the first few of them. */
  badBlocks: number;
  firstBadBlocks: number[];
  /** Its closing "(read/write/corruption errors)" counts, when it completed a pass. */
  errors: { read: number; write: number; corruption: number } | null;
}

const BADBLOCKS_EVENT = new RegExp(
  [
    String.raw`From block (\d{1,19}) to (\d{1,19})`,
    String.raw`Testing with (?:pattern 0x[0-9a-f]{1,8}|random pattern):( done)?`,
    String.raw`Reading and comparing:( done)?`,
    String.raw`Interrupted at block (\d{1,19})`,
    String.raw`Pass completed, \d{1,19} bad blocks found\. \((\d{1,19})/(\d{1,19})/(\d{1,19}) errors\)`,
  ].join("|"),
  "g",
);

/** A count read from outside output: a safe integer, else 0. */
function count(text: string | undefined): number {
  const value = Number(text);
  return Number.isSafeInteger(value) ? value : 0;
}

/**
 * Reads badblocks' `-w -v` output: its stderr (the range, each pattern's write and read-compare phase, an
 * interruption, the closing error counts) and its stdout (the bad blocks, one a line). Never throws.
 */
export function parseBadblocks(stderr: string, stdout: string): BadblocksReport {
  const report: BadblocksReport = {
    first: null,
    last: null,
    writesDone: 0,
    readsDone: 0,
    interrupted: null,
    badBlocks: 0,
    firstBadBlocks: [],
    errors: null,
  };
  let phase: "write" | "read" | null = null;
  for (const match of stderr.slice(0, MAX_OUTPUT).matchAll(BADBLOCKS_EVENT)) {
    const [text, first, last, writeDone, readDone, interruptedAt, read, write, corruption] = match;
    if (first !== undefined) {
      report.first = count(first);
      report.last = count(last);
    } else if (text.startsWith("Testing")) {
      phase = "write";
      if (writeDone !== undefined) report.writesDone += 1;
    } else if (text.startsWith("Reading")) {
      phase = "read";
      if (readDone !== undefined) report.readsDone += 1;
    } else if (interruptedAt !== undefined) {
      if (phase !== null) report.interrupted = { phase, block: count(interruptedAt) };
    } else {
      report.errors = { read: count(read), write: count(write), corruption: count(corruption) };
    }
  }
  for (const line of stdout.slice(0, MAX_OUTPUT).split("\n", MAX_LINES)) {
    if (!/^\d{1,19}$/.test(line.trim())) continue;
    report.badBlocks += 1;
    if (report.firstBadBlocks.length < 20) report.firstBadBlocks.push(count(line.trim()));
  }
  return report;
}

/**
 * One device's figures from a badblocks run, in fio's shape: bytes written and read back (whole patterns plus
 * the interrupted one up to its block), MB/s of each over the run time (as fio reports a mixed read/write
 * job), I/O operations of `ioBytes` each, and its bad blocks as the error count.
 */
export function badblocksFigures(
  report: BadblocksReport,
  run: { device: string; blockSize: number; ioBytes: number; elapsedMs: number },
): FioJobResult {
  const { first, last } = report;
  const blocks = first !== null && last !== null && last >= first ? last - first + 1 : 0;
  const partial = (phase: "write" | "read"): number => {
    const at = report.interrupted;
    if (at === null || at.phase !== phase || first === null) return 0;
    return Math.min(Math.max(at.block - first, 0), blocks);
  };
  const writeBytes = (report.writesDone * blocks + partial("write")) * run.blockSize;
  const readBytes = (report.readsDone * blocks + partial("read")) * run.blockSize;
  const seconds = run.elapsedMs / 1000;
  const rate = (bytes: number): number => (seconds > 0 ? Math.round(bytes / seconds / 10_000) / 100 : 0);
  const iops = (bytes: number): number => (seconds > 0 ? Math.round(bytes / run.ioBytes / seconds) : 0);
  const { errors } = report;
  return {
    name: run.device,
    read_bytes: readBytes,
    write_bytes: writeBytes,
    read_mb_s: rate(readBytes),
    write_mb_s: rate(writeBytes),
    read_iops: iops(readBytes),
    write_iops: iops(writeBytes),
    runtime_ms: Math.round(run.elapsedMs),
    error: 0,
    total_errors: Math.max(
      report.badBlocks,
      errors === null ? 0 : errors.read + errors.write + errors.corruption,
    ),
  };
}
