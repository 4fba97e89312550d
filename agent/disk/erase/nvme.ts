import type { EraseMethod } from "../../../shared/erase.ts";
import type { DiskTools } from "../../hardware/disk-tools.ts";
import { parseSanitizeLog } from "../../hardware/linux/nvme-identify.ts";

export class NvmeEraseError extends Error {
  override name = "NvmeEraseError";
}

export type NvmeMethod = Extract<EraseMethod, `nvme_${string}`>;

export interface NvmeEraseOptions {
  tools: DiskTools;
  /** The namespace's current LBA format: a format must not change the sector size under the image. */
  lbaf: number | null;
  signal?: AbortSignal;
  /** Sanitize progress (0–1), polled from the sanitize log. */
  onProgress?: (fraction: number) => void;
  /** Between sanitize-log polls. Default 2 s. */
  pollMs?: number;
}

/** SANACT values of the Sanitize command. */
const SANACT = { nvme_sanitize_block: 2, nvme_sanitize_overwrite: 3, nvme_sanitize_crypto: 4 } as const;
/** SES values of Format NVM: 1 user data erase, 2 cryptographic erase. */
const SES = { nvme_format_user_data: 1, nvme_format_crypto: 2 } as const;

/** A format or sanitize of a large drive may take hours (overwrite sanitize especially). */
const LONG_MS = 12 * 3600_000;

/**
 * Erases an NVMe namespace with the controller's own command: Format NVM with Secure Erase Settings, or
 * Sanitize (which covers the whole subsystem, caches and over-provisioning included) waited for through
 * the sanitize log.
 * @throws NvmeEraseError with nvme-cli's complaint, or when the sanitize log reports a failure
 */
export async function nvmeErase(
  device: string,
  method: NvmeMethod,
  options: NvmeEraseOptions,
): Promise<void> {
  switch (method) {
    case "nvme_format_crypto":
    case "nvme_format_user_data":
      return format(device, { ...options, ses: SES[method] });
    case "nvme_sanitize_block":
    case "nvme_sanitize_crypto":
    case "nvme_sanitize_overwrite":
      return sanitize(device, { ...options, sanact: SANACT[method] });
  }
}

async function format(device: string, options: NvmeEraseOptions & { ses: number }): Promise<void> {
  const args = ["format", device, `--ses=${options.ses}`, "--force"];
  if (options.lbaf !== null) args.push(`--lbaf=${options.lbaf}`);
  const result = await options.tools.nvme(args, { signal: options.signal, timeoutMs: LONG_MS });
  if (result.code !== 0) throw new NvmeEraseError(`nvme ${args.join(" ")} failed: ${complaint(result)}`);
}

async function sanitize(device: string, options: NvmeEraseOptions & { sanact: number }): Promise<void> {
  const { tools, signal } = options;
  const args = ["sanitize", device, `--sanact=${options.sanact}`];
  if (options.sanact === SANACT.nvme_sanitize_overwrite) args.push("--owpass=1", "--ovrpat=0");
  const started = await tools.nvme(args, { signal, timeoutMs: 120_000 });
  if (started.code !== 0) throw new NvmeEraseError(`nvme ${args.join(" ")} failed: ${complaint(started)}`);
  // The command returns at once; the controller works in the background and reports in its log.
  let notStarted = 0;
  for (;;) {
    await sleep(options.pollMs ?? 2_000, signal);
    const log = await tools.nvme(["sanitize-log", device, "-o", "json"], { signal });
    if (log.code !== 0) throw new NvmeEraseError(`nvme sanitize-log ${device} failed: ${complaint(log)}`);
    const { status, progress } = parseSanitizeLog(log.stdout);
    if (status === 1 || status === 4) return options.onProgress?.(1);
    if (status === 3) throw new NvmeEraseError(`the controller reports the sanitize of ${device} failed`);
    if (status === 2) options.onProgress?.(progress);
    else if (++notStarted > 5) throw new NvmeEraseError(`the sanitize of ${device} never started`);
  }
}

function complaint(result: { stderr: string; stdout: string; code: number | null }): string {
  return (result.stderr.trim() || result.stdout.trim() || `exit code ${result.code}`).slice(0, 500);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
