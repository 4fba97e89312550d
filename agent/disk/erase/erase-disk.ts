import type { EraseDiskResult, EraseMethod, EraseOptions } from "../../../shared/erase.ts";
import type { Logger } from "../../../shared/log.ts";
import type { DiskCapabilities, DiskTools } from "../../hardware/disk-tools.ts";
import { ataSecureErase } from "./ata.ts";
import { discardDisk } from "./discard.ts";
import { eraseMetadata } from "./metadata.ts";
import { nvmeErase } from "./nvme.ts";
import { overwrite } from "./overwrite.ts";
import type { EraseAttempt } from "./select.ts";
import { planSamples, sampleDigests, verifySamples } from "./verify.ts";
import type { Expectation, Sample } from "./verify.ts";

/** A disk's erase failed: the message names the disk and the method, for the node's last_error. */
export class DiskEraseError extends Error {
  override name = "DiskEraseError";
  constructor(
    readonly device: string,
    readonly method: EraseMethod,
    reason: string,
  ) {
    super(`${device}: ${method} failed: ${reason}`);
  }
}

export interface DiskProgress {
  message: string;
  bytes_done?: number;
  bytes_total?: number;
}

export interface EraseDiskContext {
  tools: DiskTools;
  options: Pick<
    EraseOptions,
    | "shred_random_overwrite_iterations"
    | "shred_final_overwrite_with_zeros"
    | "overwrite_block_mib"
    | "overwrite_depth"
  >;
  signal: AbortSignal;
  logger: Logger;
  report(progress: DiskProgress): void;
  /** Between NVMe sanitize-log polls (tests shorten it). Default 2 s. */
  pollMs?: number;
}

/**
 * Runs a disk's erase plan: each attempt erases and then reads samples back; a failed read-back fails the
 * attempt like a failed command. The next attempt runs only where the plan allows it.
 * @throws DiskEraseError naming the disk and the last method tried; the signal's reason when aborted
 */
export async function eraseDisk(
  caps: DiskCapabilities,
  attempts: readonly EraseAttempt[],
  context: EraseDiskContext,
): Promise<EraseDiskResult> {
  const device = caps.disk.name;
  const started = performance.now();
  const fellBack: Array<{ method: EraseMethod; error: string }> = [];
  for (const attempt of attempts) {
    context.signal.throwIfAborted();
    context.report({ message: `${attempt.method} started` });
    try {
      const bytes = await runMethod(caps, attempt.method, context);
      const seconds = Math.round((performance.now() - started) / 10) / 100;
      context.logger.info({ device, method: attempt.method, bytes, seconds }, "disk erased and verified");
      return {
        device,
        method: attempt.method,
        verified: true,
        bytes,
        seconds,
        skipped: null,
        ...(fellBack.length > 0 ? { fell_back: fellBack } : {}),
      };
    } catch (error) {
      if (context.signal.aborted) throw error;
      const message = (error as Error).message;
      context.logger.warn({ device, method: attempt.method, err: message }, "erase method failed");
      if (attempt.onFailure === "fail") throw new DiskEraseError(device, attempt.method, message);
      fellBack.push({ method: attempt.method, error: message });
    }
  }
  throw new DiskEraseError(device, attempts.at(-1)?.method ?? "overwrite", "no method left to try");
}

/** Erases with one method and verifies; returns the bytes it covered. @throws Error when either fails */
async function runMethod(
  caps: DiskCapabilities,
  method: EraseMethod,
  context: EraseDiskContext,
): Promise<number> {
  const { tools, signal } = context;
  const device = caps.disk.name;
  const size = caps.disk.size;
  const samples = planSamples(size);
  switch (method) {
    case "overwrite": {
      const {
        shred_random_overwrite_iterations: randomPasses,
        shred_final_overwrite_with_zeros: finalZeros,
        overwrite_block_mib: blockMib,
        overwrite_depth: depth,
      } = context.options;
      const result = await overwrite({
        path: device,
        size,
        randomPasses,
        finalZeros,
        ...(blockMib === undefined ? {} : { blockSize: blockMib * 1024 * 1024 }),
        ...(depth === undefined ? {} : { depth }),
        samples,
        signal,
        onProgress: (done, total) =>
          context.report({ message: method, bytes_done: done, bytes_total: total }),
      });
      await check(device, { samples, expect: { kind: "digests", digests: result.digests }, signal });
      return size;
    }
    case "discard":
    case "write_zeroes":
      await discardDisk(device, { tools, zeroOut: method === "write_zeroes", signal });
      await check(device, { samples, expect: { kind: "zeros" }, signal });
      return size;
    case "metadata": {
      const erased = await eraseMetadata(device, { size, signal, logger: context.logger });
      await check(device, { samples: erased.samples, expect: { kind: "zeros" }, signal });
      return erased.bytes;
    }
    case "ata_secure_erase":
    case "ata_secure_erase_enhanced": {
      const before = await sampleDigests(device, samples, signal);
      await ataSecureErase(device, { tools, enhanced: method === "ata_secure_erase_enhanced", signal });
      await check(device, { samples, expect: { kind: "changed", before }, signal });
      return size;
    }
    case "nvme_format_crypto":
    case "nvme_format_user_data":
    case "nvme_sanitize_block":
    case "nvme_sanitize_crypto":
    case "nvme_sanitize_overwrite": {
      const before = await sampleDigests(device, samples, signal);
      await nvmeErase(device, method, {
        tools,
        lbaf: caps.nvme?.lbaf ?? null,
        signal,
        pollMs: context.pollMs,
        onProgress: (fraction) =>
          context.report({ message: method, bytes_done: Math.round(fraction * size), bytes_total: size }),
      });
      await check(device, { samples, expect: { kind: "changed", before }, signal });
      return size;
    }
  }
}

/** @throws Error saying how many samples were wrong and where the first one is */
async function check(
  device: string,
  plan: { samples: readonly Sample[]; expect: Expectation; signal: AbortSignal },
): Promise<void> {
  const result = await verifySamples(device, plan.samples, { expect: plan.expect, signal: plan.signal });
  if (result.ok) return;
  const first = result.bad[0] as Sample;
  throw new Error(
    `verify: ${result.bad.length} of ${result.checked} sampled regions still hold other data (first at byte ${first.offset}, ${first.length} bytes)`,
  );
}
