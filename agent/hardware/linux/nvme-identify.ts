import { z } from "zod";
import type { NvmeCapabilities } from "../disk-tools.ts";

/** `nvme id-ctrl -o json`: only the fields erasing needs; nvme-cli prints many more. */
const IdCtrlSchema = z.object({
  oacs: z.number().int().nonnegative(),
  fna: z.number().int().nonnegative(),
  sanicap: z.number().int().nonnegative().optional(),
});

/** `nvme id-ns -o json`. */
const IdNsSchema = z.object({
  flbas: z.number().int().nonnegative(),
  dlfeat: z.number().int().nonnegative().optional(),
});

const OACS_FORMAT = 1 << 1;
const FNA_CRYPTO = 1 << 2;
const SANICAP_CRYPTO = 1 << 0;
const SANICAP_BLOCK = 1 << 1;
const SANICAP_OVERWRITE = 1 << 2;

function parseJson<T>(text: string, schema: z.ZodType<T>, what: string): T {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    throw new Error(`${what} did not print JSON`);
  }
  const parsed = schema.safeParse(data);
  if (!parsed.success)
    throw new Error(`${what} JSON lacks ${parsed.error.issues[0]?.path.join(".") ?? "fields"}`);
  return parsed.data;
}

/**
 * Erase capabilities from the controller's and the namespace's identify data (id-ns may be absent).
 * @throws Error when the id-ctrl text is not nvme-cli's JSON with oacs and fna
 */
export function parseNvmeIdentify(idCtrl: string, idNs: string | null): NvmeCapabilities {
  const ctrl = parseJson(idCtrl, IdCtrlSchema, "nvme id-ctrl");
  const ns = idNs === null ? null : safe(() => parseJson(idNs, IdNsSchema, "nvme id-ns"));
  const sanicap = ctrl.sanicap ?? 0;
  return {
    format: (ctrl.oacs & OACS_FORMAT) !== 0,
    cryptoFormat: (ctrl.fna & FNA_CRYPTO) !== 0,
    sanitize: {
      crypto: (sanicap & SANICAP_CRYPTO) !== 0,
      block: (sanicap & SANICAP_BLOCK) !== 0,
      overwrite: (sanicap & SANICAP_OVERWRITE) !== 0,
    },
    // FLBAS bits 3:0 are the format's low bits, bits 6:5 its high bits (NVMe 2.0, up to 64 formats).
    lbaf: ns === null ? null : (ns.flbas & 0xf) | (((ns.flbas >> 5) & 0x3) << 4),
    deallocatedReadZero: ns !== null && ((ns.dlfeat ?? 0) & 0x7) === 1,
  };
}

function safe<T>(fn: () => T): T | null {
  try {
    return fn();
  } catch {
    return null;
  }
}

/** Sanitize status (SSTAT bits 2:0) and progress, from `nvme sanitize-log -o json`. */
export interface SanitizeStatus {
  /** 0 never sanitized, 1 completed, 2 in progress, 3 failed, 4 completed without deallocation. */
  status: number;
  /** Fraction done while in progress (SPROG / 65536). */
  progress: number;
}

/**
 * nvme-cli 1.x prints `{"sprog": n, "sstat": n, …}`; 2.x nests it under the device name with `sstat` an
 * object whose `status` reads "(N) text". Both are accepted.
 * @throws Error when neither shape is found
 */
export function parseSanitizeLog(text: string): SanitizeStatus {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    throw new Error("nvme sanitize-log did not print JSON");
  }
  const found = findSanitize(data, 0);
  if (found === null) throw new Error("nvme sanitize-log JSON has no sprog/sstat");
  return found;
}

function findSanitize(data: unknown, depth: number): SanitizeStatus | null {
  if (typeof data !== "object" || data === null || Array.isArray(data) || depth > 3) return null;
  const record = data as Record<string, unknown>;
  const status = sstatOf(record.sstat);
  if (typeof record.sprog === "number" && status !== null) {
    return { status, progress: Math.min(1, Math.max(0, record.sprog / 65536)) };
  }
  for (const value of Object.values(record)) {
    const nested = findSanitize(value, depth + 1);
    if (nested !== null) return nested;
  }
  return null;
}

function sstatOf(value: unknown): number | null {
  if (typeof value === "number" && Number.isInteger(value)) return value & 0x7;
  if (typeof value === "object" && value !== null && "status" in value) {
    const status = (value as { status: unknown }).status;
    if (typeof status === "number") return status & 0x7;
    const match = typeof status === "string" ? /^\((\d+)\)/.exec(status) : null;
    if (match?.[1] !== undefined) return Number(match[1]) & 0x7;
  }
  return null;
}
