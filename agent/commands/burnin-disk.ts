import { BURNIN_DISK_STALL_DEFAULT_S } from "../../shared/burnin.ts";
import type { FioJobResult } from "../../shared/burnin.ts";
import { CodedError } from "../../shared/errors.ts";
import { parseFioJson, tail } from "../hardware/burnin-output.ts";
import { runBadblocks } from "./badblocks.ts";
import type { CommandHandler } from "./command.ts";
import { watchingDisks } from "./stall-watch.ts";

/** IPA's default: 4 loops, as badblocks does. */
const DEFAULT_LOOPS = 4;

/**
 * burnin_disk (IPA's burnin.fio_disk): one fio run with a job per disk (the job's name is the device, which
 * fio then opens), mixed 4 KiB reads and writes with direct I/O, libaio at queue depth 32, every block
 * verified by CRC32C, for `loops` passes or `runtime` seconds. The per-disk figures (MB/s, IOPS, errors) are
 * the result; an I/O or verify error, or fio failing, fails the step naming the disks. Where there is no fio
 * (the arm64 ramdisk: the x86 one carries fio built without its optional engines), badblocks'
 * write-read-verify test runs instead, with the same knobs and the same figures (runBadblocks says how the
 * knobs map). fio stalled (no I/O completed on the disks for `stall_timeout`) is stopped and fails the step.
 * @throws CodedError BAD_ARGS for a disk the machine does not have; COMMAND_FAILED as above.
 */
export const burninDisk: CommandHandler<"burnin_disk"> = async (args, context) => {
  const { backend, signal, progress, logger } = context;
  const disks = (await backend.disks()).map((disk) => disk.name);
  const unknown = (args.devices ?? []).filter((device) => !disks.includes(device));
  if (unknown.length > 0) {
    throw new CodedError("BAD_ARGS", `burnin_disk: no such disk: ${unknown.join(", ")}`);
  }
  const devices = args.devices ?? disks;
  if (devices.length === 0) throw new CodedError("COMMAND_FAILED", "burnin_disk: the machine has no disk");
  const loops = args.loops ?? DEFAULT_LOOPS;
  const runtime = args.runtime ?? 0;
  const fioArgs = [
    "--rw=readwrite",
    "--bs=4k",
    "--direct=1",
    "--ioengine=libaio",
    "--iodepth=32",
    "--verify=crc32c",
    "--verify_dump=1",
    "--continue_on_error=verify",
    // no verify state file left in the working directory
    "--verify_state_save=0",
    `--loops=${loops}`,
    `--runtime=${runtime}`,
    "--time_based",
    "--output-format=json",
    ...devices.map((device) => `--name=${device}`),
  ];
  progress({ step: "burnin_disk", message: `fio on ${devices.join(", ")}` });
  // A disk or controller that stops answering would hold fio, and the node, until the conductor's bound (a
  // week for loops without a runtime): no I/O completed for stall_timeout stops fio and fails the step.
  const stallS = args.stall_timeout ?? BURNIN_DISK_STALL_DEFAULT_S;
  let run;
  try {
    run = await watchingDisks({ devices, stallS, tool: "fio" }, context, (watched) =>
      backend.burnin.fio(fioArgs, {
        signal: watched,
        ...(runtime > 0 ? { timeoutMs: (runtime * loops + 600) * 1000 } : {}),
      }),
    );
  } catch (error) {
    if (signal.aborted || error instanceof CodedError) throw error;
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      logger.info("no fio here: burnin_disk runs badblocks");
      return runBadblocks({ devices, loops, runtime, stallS }, context);
    }
    throw new CodedError("COMMAND_FAILED", `burnin_disk: fio failed: ${(error as Error).message}`);
  }
  const jobs = parseFioJson(run.stdout);
  logger.info({ code: run.code, jobs }, "fio (disk) done");
  if (jobs === null) {
    throw new CodedError(
      "COMMAND_FAILED",
      `burnin_disk: fio exited with status ${run.code ?? run.signal} and no report: ${tail(run.stderr)}`,
    );
  }
  const bad = jobs.filter((job: FioJobResult) => job.error !== 0 || job.total_errors > 0);
  if (bad.length > 0) {
    const named = bad.map(
      (job) => `${job.name} (error ${job.error}, ${job.total_errors} I/O or verify errors)`,
    );
    throw new CodedError("COMMAND_FAILED", `burnin_disk: fio found errors on ${named.join(", ")}`);
  }
  if (run.code !== 0) {
    throw new CodedError(
      "COMMAND_FAILED",
      `burnin_disk: fio exited with status ${run.code}: ${tail(run.stderr)}`,
    );
  }
  return { tool: "fio", loops, runtime_s: runtime, devices: jobs };
};
