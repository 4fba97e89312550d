import type { EraseDiskResult, EraseOptions } from "../../../shared/erase.ts";
import type { Disk } from "../../../shared/inventory.ts";
import type { Logger } from "../../../shared/log.ts";
import type { DiskTools } from "../../hardware/disk-tools.ts";
import { DiskEraseError, eraseDisk } from "./erase-disk.ts";
import type { DiskProgress } from "./erase-disk.ts";
import { selectErase } from "./select.ts";
import type { EraseMode } from "./select.ts";

export class EraseRefusedError extends Error {
  override name = "EraseRefusedError";
}

export interface EraseDevicesRequest {
  disks: readonly Disk[];
  mode: EraseMode;
  options: EraseOptions;
  tools: DiskTools;
  signal: AbortSignal;
  logger: Logger;
  /** Disks holding software RAID members (left alone, as IPA does), beside what each disk's sysfs says. */
  raidMembers?: ReadonlySet<string>;
  /** Per-disk progress; the caller throttles and frames it. */
  report(device: string, progress: DiskProgress): void;
  /** Between NVMe sanitize-log polls (tests shorten it). */
  pollMs?: number;
}

/**
 * Erases disks in parallel (at most disk_erasure_concurrency at once), each with the method its
 * capabilities and the options select. Every disk's plan is made before any disk is touched, so a disk
 * that cannot be erased (read-only, no method) fails the step with nothing half done. A disk that fails
 * while erasing does not stop the others; the step fails once all settled, naming every failed disk.
 * @throws EraseRefusedError before erasing; DiskEraseError (one disk) or AggregateError of them after;
 *   the signal's reason when aborted
 */
export async function eraseDevices(request: EraseDevicesRequest): Promise<EraseDiskResult[]> {
  const { mode, options, tools, signal, logger } = request;
  const caps = await Promise.all(
    request.disks.map((disk) =>
      tools.capabilities(disk, signal).catch((error: unknown) => {
        if (signal.aborted) throw error;
        throw new EraseRefusedError(`${disk.name}: cannot examine the disk: ${(error as Error).message}`);
      }),
    ),
  );
  const members = request.raidMembers ?? new Set<string>();
  const plans = caps.map((found) => {
    const cap = { ...found, raidMember: found.raidMember || members.has(found.disk.name) };
    return { cap, plan: selectErase(cap, { mode, options }) };
  });
  const refused = plans.flatMap(({ cap, plan }) =>
    plan.action === "fail" ? [`${cap.disk.name}: ${plan.reason}`] : [],
  );
  if (refused.length > 0) throw new EraseRefusedError(refused.join("; "));
  const results: EraseDiskResult[] = [];
  const failures: DiskEraseError[] = [];
  const queue = plans.slice();
  const worker = async (): Promise<void> => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
      const { cap, plan } = next;
      const device = cap.disk.name;
      if (plan.action === "skip") {
        logger.info({ device, reason: plan.reason }, "disk not erased");
        results.push({ device, method: null, verified: false, bytes: 0, seconds: 0, skipped: plan.reason });
        continue;
      }
      if (plan.action !== "erase") continue;
      if (plan.passedOver.length > 0)
        logger.info({ device, passed_over: plan.passedOver }, "erase methods passed over");
      try {
        results.push(
          await eraseDisk(cap, plan.attempts, {
            tools,
            options,
            signal,
            pollMs: request.pollMs,
            logger: logger.child({ device }),
            report: (progress) => request.report(device, progress),
          }),
        );
      } catch (error) {
        if (signal.aborted || !(error instanceof DiskEraseError)) throw error;
        failures.push(error);
      }
    }
  };
  const width = Math.min(options.disk_erasure_concurrency, Math.max(1, plans.length));
  await Promise.all(Array.from({ length: width }, worker));
  if (failures.length === 1) throw failures[0];
  if (failures.length > 1)
    throw new AggregateError(failures, failures.map((failure) => failure.message).join("; "));
  const order = new Map(request.disks.map((disk, index) => [disk.name, index]));
  return results.sort((a, b) => (order.get(a.device) ?? 0) - (order.get(b.device) ?? 0));
}
