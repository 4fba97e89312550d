import { z } from "zod";
import { CodedError } from "../../shared/errors.ts";
import type { CommandHandler } from "./command.ts";

/** smartctl's exit status bit 3: "SMART status check returned DISK FAILING". */
const DISK_FAILING = 1 << 3;

/** What `smartctl -H -j` says that matters here; everything else in its JSON is ignored. */
const SmartReport = z.object({
  smartctl: z
    .object({
      exit_status: z.number().int().optional(),
      messages: z.array(z.object({ string: z.string().max(1024) }).loose()).optional(),
    })
    .loose()
    .optional(),
  smart_status: z.object({ passed: z.boolean() }).loose().optional(),
});

export interface SmartHealth {
  device: string;
  /** unknown: the drive has no SMART (a virtual disk, a file) or smartctl could not tell. */
  health: "passed" | "failing" | "unknown";
  message?: string;
}

/**
 * Reads one disk's `smartctl -H -j` answer (output and exit status). Never throws: anything it cannot read
 * is `unknown`, and a disk is failing only when smartctl says so (smart_status.passed false or exit bit 3).
 */
export function parseSmartHealth(device: string, stdout: string, exitCode: number | null): SmartHealth {
  let json: unknown;
  try {
    json = JSON.parse(stdout);
  } catch {
    json = undefined;
  }
  const report = SmartReport.safeParse(json);
  const status = report.success ? report.data.smart_status?.passed : undefined;
  const exit = (report.success ? report.data.smartctl?.exit_status : undefined) ?? exitCode ?? 0;
  if (status === false || (exit & DISK_FAILING) !== 0) {
    return { device, health: "failing", message: "SMART overall-health self-assessment: FAILED" };
  }
  if (status === true) return { device, health: "passed" };
  const said = report.success ? report.data.smartctl?.messages?.[0]?.string : undefined;
  return { device, health: "unknown", message: said ?? "smartctl gave no SMART health status" };
}

/**
 * check_smart_health: asks every disk (or the named ones) for its SMART overall health through the backend's
 * smartctl, and fails naming each disk that reports failing. Disks without SMART pass as `unknown`.
 * @throws CodedError BAD_ARGS for a disk the machine does not have; COMMAND_FAILED naming failing disks, or
 *   when smartctl cannot run at all.
 */
export const checkSmartHealth: CommandHandler<"check_smart_health"> = async (args, context) => {
  const { backend, signal, progress, logger } = context;
  const disks = (await backend.disks()).map((disk) => disk.name);
  const unknown = (args.devices ?? []).filter((device) => !disks.includes(device));
  if (unknown.length > 0) {
    throw new CodedError("BAD_ARGS", `check_smart_health: no such disk: ${unknown.join(", ")}`);
  }
  const results: SmartHealth[] = [];
  for (const device of args.devices ?? disks) {
    progress({ step: "check_smart_health", message: `reading SMART health of ${device}` });
    let result;
    try {
      result = await backend.diskTools.smartctl(["-H", "-j", device], { signal });
    } catch (error) {
      if (signal.aborted) throw error;
      throw new CodedError(
        "COMMAND_FAILED",
        `check_smart_health: smartctl on ${device}: ${(error as Error).message}`,
      );
    }
    results.push(parseSmartHealth(device, result.stdout, result.code));
  }
  logger.info({ results }, "SMART health read");
  const failing = results.filter((r) => r.health === "failing").map((r) => r.device);
  if (failing.length > 0) {
    throw new CodedError(
      "COMMAND_FAILED",
      `check_smart_health: SMART reports ${failing.length === 1 ? "disk" : "disks"} ${failing.join(", ")} failing`,
    );
  }
  return { devices: results };
};
