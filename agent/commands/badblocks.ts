import { performance } from "node:perf_hooks";
import { BURNIN_DISK_STALL_DEFAULT_S } from "../../shared/burnin.ts";
import type { FioJobResult } from "../../shared/burnin.ts";
import { CodedError } from "../../shared/errors.ts";
import { badblocksFigures, parseBadblocks, tail } from "../hardware/burnin-output.ts";
import type { CommandContext } from "./command.ts";
import { watchingDisks } from "./stall-watch.ts";

/** badblocks' own -w patterns, in its order: one write-read-compare pass each. */
export const BADBLOCKS_PATTERNS = ["0xaa", "0x55", "0xff", "0x00"] as const;
const BLOCK_SIZE = 4096;
/** Blocks per read or write: 1 MiB I/Os. */
const BLOCKS_AT_ONCE = 256;
/** badblocks stops after this many bad blocks: a dying disk is failed, not listed whole. */
const MAX_BAD_BLOCKS = 1000;
/** Past its stop (or its loops with no runtime), a run may take this long to end before it is killed. */
const OVERRUN_MARGIN_S = 600;

/** What burnin_disk reports when badblocks ran. */
export interface BadblocksResult {
  tool: "badblocks";
  loops: number;
  runtime_s: number;
  patterns: string[];
  block_size: number;
  devices: FioJobResult[];
}

/**
 * burnin_disk without fio: e2fsprogs' badblocks write-read-verify test (`-w`), one process per disk, all at
 * once as fio's jobs are. IPA's knobs map so: `loops` is the number of patterns, each a full write then
 * read-and-compare of the disk (badblocks' own 0xaa, 0x55, 0xff, 0x00, repeated: 4 loops is its default
 * test); `runtime` > 0 interrupts every disk after that many seconds (badblocks reports the block it reached,
 * and the figures count up to it), 0 lets the loops finish. No I/O completed on the disks for `stallS` stops
 * every badblocks and fails the step (stall-watch.ts).
 * @throws CodedError COMMAND_FAILED naming each disk with bad blocks, or that badblocks could not test.
 */
export async function runBadblocks(
  options: { devices: readonly string[]; loops: number; runtime: number; stallS?: number },
  context: CommandContext,
): Promise<BadblocksResult> {
  const { devices, loops, runtime, stallS = BURNIN_DISK_STALL_DEFAULT_S } = options;
  const { backend, progress, logger } = context;
  const patterns = Array.from(
    { length: loops },
    (_, i) => BADBLOCKS_PATTERNS[i % BADBLOCKS_PATTERNS.length]!,
  );
  const args = [
    "-w",
    "-v",
    "-b",
    String(BLOCK_SIZE),
    "-c",
    String(BLOCKS_AT_ONCE),
    "-e",
    String(MAX_BAD_BLOCKS),
    ...patterns.flatMap((pattern) => ["-t", pattern]),
  ];
  progress({ step: "burnin_disk", message: `badblocks -w (${loops} patterns) on ${devices.join(", ")}` });
  // one watch over every disk, as for fio: a stall is no I/O completed on any of them
  const runs = await watchingDisks({ devices, stallS, tool: "badblocks" }, context, (watched) =>
    Promise.all(
      devices.map(async (device) => {
        const started = performance.now();
        let run;
        try {
          run = await backend.burnin.badblocks([...args, device], {
            signal: watched,
            ...(runtime > 0
              ? { stopAfterMs: runtime * 1000, timeoutMs: (runtime + OVERRUN_MARGIN_S) * 1000 }
              : {}),
          });
        } catch (error) {
          if (watched.aborted) throw error;
          throw new CodedError(
            "COMMAND_FAILED",
            `burnin_disk: badblocks on ${device} failed: ${(error as Error).message}`,
          );
        }
        const elapsedMs = performance.now() - started;
        const report = parseBadblocks(run.stderr, run.stdout);
        logger.info({ device, code: run.code, report }, "badblocks done");
        return { device, run, report, elapsedMs };
      }),
    ),
  );
  const failures: string[] = [];
  const figures = runs.map(({ device, run, report, elapsedMs }) => {
    const job = badblocksFigures(report, {
      device,
      blockSize: BLOCK_SIZE,
      ioBytes: BLOCK_SIZE * BLOCKS_AT_ONCE,
      elapsedMs,
    });
    if (job.total_errors > 0) {
      const errors = report.errors;
      const counts =
        errors === null
          ? ""
          : ` (${errors.read}/${errors.write}/${errors.corruption} read/write/compare errors)`;
      failures.push(
        `${device}: ${job.total_errors} bad blocks${counts}, first ${report.firstBadBlocks.slice(0, 5).join(", ")}`,
      );
    } else if (report.first === null) {
      failures.push(
        `${device}: badblocks did not test (status ${run.code ?? run.signal}): ${tail(run.stderr)}`,
      );
    } else if (run.code !== 0 && report.interrupted === null) {
      failures.push(`${device}: badblocks exited with status ${run.code ?? run.signal}: ${tail(run.stderr)}`);
    }
    return job;
  });
  if (failures.length > 0) {
    throw new CodedError("COMMAND_FAILED", `burnin_disk: badblocks found errors on ${failures.join("; ")}`);
  }
  return { tool: "badblocks", loops, runtime_s: runtime, patterns, block_size: BLOCK_SIZE, devices: figures };
}
