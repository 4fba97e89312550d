import { z } from "zod";
import { CodedError } from "../../shared/errors.ts";
import type { CommandHandler } from "./command.ts";

/** smartctl's exit status bit 3: "SMART status check returned DISK FAILING". */
const DISK_FAILING = 1 << 3;
/** ATA attribute ids: Reallocated_Sector_Ct and Current_Pending_Sector. */
const REALLOCATED = 5;
const PENDING = 197;
export const DEFAULT_MAX_REALLOCATED_SECTORS = 100;
export const DEFAULT_MAX_PENDING_SECTORS = 0;

const Count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

/** What `smartctl -H -A -j` says that matters here; everything else in its JSON is ignored. */
const SmartReport = z.object({
  smartctl: z
    .object({
      exit_status: z.number().int().optional(),
      messages: z.array(z.object({ string: z.string().max(1024) }).loose()).optional(),
    })
    .loose()
    .optional(),
  smart_status: z.object({ passed: z.boolean() }).loose().optional(),
  ata_smart_attributes: z
    .object({
      table: z
        .array(z.object({ id: z.number().int(), raw: z.object({ value: Count }).loose().optional() }).loose())
        .max(512),
    })
    .loose()
    .optional()
    .catch(undefined),
  nvme_smart_health_information_log: z
    .object({ critical_warning: Count.optional(), media_errors: Count.optional() })
    .loose()
    .optional()
    .catch(undefined),
});

export interface SmartHealth {
  device: string;
  /** unknown: the drive has no SMART (a virtual disk, a file) or smartctl could not tell. */
  health: "passed" | "failing" | "unknown";
  message?: string;
  /** ATA: Reallocated_Sector_Ct and Current_Pending_Sector raw values, when the drive reports them. */
  reallocated_sectors?: number;
  pending_sectors?: number;
  /** NVMe: the health log's critical warning bits and media errors. */
  critical_warning?: number;
  media_errors?: number;
}

export interface SmartThresholds {
  maxReallocated: number;
  maxPending: number;
}

const DEFAULT_THRESHOLDS: SmartThresholds = {
  maxReallocated: DEFAULT_MAX_REALLOCATED_SECTORS,
  maxPending: DEFAULT_MAX_PENDING_SECTORS,
};

/**
 * Reads one disk's `smartctl -H -A -j` answer (output and exit status). Never throws: anything it cannot read
 * is `unknown`. A disk is failing when smartctl says so (smart_status.passed false, which an NVMe critical
 * warning also sets, or exit bit 3), or when its reallocated or pending sectors exceed the thresholds.
 */
export function parseSmartHealth(device: string, stdout: string, exitCode: number | null): SmartHealth {
  return smartVerdict(device, { stdout, code: exitCode }, DEFAULT_THRESHOLDS);
}

/** parseSmartHealth with the step's sector thresholds. */
export function smartVerdict(
  device: string,
  run: { stdout: string; code: number | null },
  thresholds: SmartThresholds,
): SmartHealth {
  const { stdout, code: exitCode } = run;
  let json: unknown;
  try {
    json = JSON.parse(stdout);
  } catch {
    json = undefined;
  }
  const report = SmartReport.safeParse(json);
  const data = report.success ? report.data : undefined;
  const figures: Omit<SmartHealth, "device" | "health" | "message"> = {};
  const raw = (id: number) => data?.ata_smart_attributes?.table.find((a) => a.id === id)?.raw?.value;
  const reallocated = raw(REALLOCATED);
  const pending = raw(PENDING);
  if (reallocated !== undefined) figures.reallocated_sectors = reallocated;
  if (pending !== undefined) figures.pending_sectors = pending;
  const nvme = data?.nvme_smart_health_information_log;
  if (nvme?.critical_warning !== undefined) figures.critical_warning = nvme.critical_warning;
  if (nvme?.media_errors !== undefined) figures.media_errors = nvme.media_errors;

  const status = data?.smart_status?.passed;
  const exit = data?.smartctl?.exit_status ?? exitCode ?? 0;
  const failing = (message: string): SmartHealth => ({ device, health: "failing", message, ...figures });
  if (status === false || (exit & DISK_FAILING) !== 0) {
    const warning = figures.critical_warning
      ? ` (NVMe critical warning 0x${figures.critical_warning.toString(16)})`
      : "";
    return failing(`SMART overall-health self-assessment: FAILED${warning}`);
  }
  if (reallocated !== undefined && reallocated > thresholds.maxReallocated) {
    return failing(`${reallocated} reallocated sectors (more than ${thresholds.maxReallocated})`);
  }
  if (pending !== undefined && pending > thresholds.maxPending) {
    return failing(`${pending} pending sectors (more than ${thresholds.maxPending})`);
  }
  if (status === true) return { device, health: "passed", ...figures };
  const said = data?.smartctl?.messages?.[0]?.string;
  return { device, health: "unknown", message: said ?? "smartctl gave no SMART health status", ...figures };
}

/**
 * smart_check: asks every disk (or the named ones) for its SMART overall health and attributes through the
 * backend's smartctl, and fails naming each disk that is failing. Disks without SMART pass as `unknown`.
 * @throws CodedError BAD_ARGS for a disk the machine does not have; COMMAND_FAILED naming failing disks and
 *   why, or when smartctl cannot run at all.
 */
export const smartCheck: CommandHandler<"smart_check"> = async (args, context) => {
  const { backend, signal, progress, logger } = context;
  const thresholds: SmartThresholds = {
    maxReallocated: args.max_reallocated_sectors ?? DEFAULT_MAX_REALLOCATED_SECTORS,
    maxPending: args.max_pending_sectors ?? DEFAULT_MAX_PENDING_SECTORS,
  };
  const disks = (await backend.disks()).map((disk) => disk.name);
  const unknown = (args.devices ?? []).filter((device) => !disks.includes(device));
  if (unknown.length > 0) {
    throw new CodedError("BAD_ARGS", `smart_check: no such disk: ${unknown.join(", ")}`);
  }
  const results: SmartHealth[] = [];
  for (const device of args.devices ?? disks) {
    progress({ step: "smart_check", message: `reading SMART health of ${device}` });
    let result;
    try {
      result = await backend.diskTools.smartctl(["-H", "-A", "-j", device], { signal });
    } catch (error) {
      if (signal.aborted) throw error;
      throw new CodedError(
        "COMMAND_FAILED",
        `smart_check: smartctl on ${device}: ${(error as Error).message}`,
      );
    }
    results.push(smartVerdict(device, result, thresholds));
  }
  logger.info({ results }, "SMART health read");
  const failing = results.filter((r) => r.health === "failing");
  if (failing.length > 0) {
    throw new CodedError(
      "COMMAND_FAILED",
      `smart_check: SMART reports ${failing.length === 1 ? "disk" : "disks"} ${failing
        .map((r) => `${r.device} failing: ${r.message}`)
        .join("; ")}`,
    );
  }
  return { devices: results };
};
