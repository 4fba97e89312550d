import { z } from "zod";
import { GIB } from "./inventory.ts";
import type { Disk } from "./inventory.ts";

/**
 * Root device hints, as Ironic's `properties.root_device`. String hints compare case-insensitively and
 * may carry an operator ("s==", "s!=", "<in>", "<or> a <or> b", …); `size` is in GiB and may carry a
 * numeric operator ("==", "!=", ">=", "<=", ">", "<"; a bare number means "==").
 */
export const RootDeviceHintsSchema = z
  .object({
    name: z.string(),
    model: z.string(),
    vendor: z.string(),
    serial: z.string(),
    wwn: z.string(),
    wwn_with_extension: z.string(),
    wwn_vendor_extension: z.string(),
    hctl: z.string(),
    by_path: z.string(),
    size: z.union([z.number().int().nonnegative(), z.string()]),
    rotational: z.union([z.boolean(), z.string()]),
  })
  .partial()
  .strict();
export type RootDeviceHints = z.infer<typeof RootDeviceHintsSchema>;

/** IPA's floor for the default choice: disks smaller than this are never picked without hints. */
export const MIN_ROOT_DISK_BYTES = 4 * GIB;

const STRING_HINTS = [
  "model",
  "vendor",
  "serial",
  "wwn",
  "wwn_with_extension",
  "wwn_vendor_extension",
  "hctl",
  "name",
  "by_path",
] as const;

/**
 * Picks the target disk: the first disk (in inventory order) matching every hint, or, without hints,
 * the smallest disk of at least 4 GiB (IPA's default). Returns null when nothing fits.
 * @throws Error when a hint expression cannot be parsed (a bad operator, a non-numeric size).
 */
export function selectRootDevice(disks: readonly Disk[], hints?: RootDeviceHints | null): Disk | null {
  if (hints && Object.keys(hints).length > 0) {
    return disks.find((disk) => matchesHints(disk, hints)) ?? null;
  }
  const candidates = disks.filter((disk) => disk.size >= MIN_ROOT_DISK_BYTES);
  candidates.sort((a, b) => a.size - b.size);
  return candidates[0] ?? null;
}

/** True when the disk satisfies every given hint. @throws Error on an unparsable hint. */
export function matchesHints(disk: Disk, hints: RootDeviceHints): boolean {
  for (const key of STRING_HINTS) {
    const hint = hints[key];
    if (hint === undefined) continue;
    const value = disk[key];
    if (value === null) return false;
    const normalise = key === "name" || key === "by_path" ? devPath(key) : (s: string) => s;
    if (!matchString(normalise(value), hint, normalise)) return false;
  }
  if (hints.size !== undefined && !matchSize(Math.floor(disk.size / GIB), hints.size)) return false;
  if (hints.rotational !== undefined && disk.rotational !== parseBool(hints.rotational)) return false;
  return true;
}

/** IPA accepts "sda" for "/dev/sda" and a bare by-path link name. */
function devPath(key: "name" | "by_path"): (s: string) => string {
  const prefix = key === "name" ? "/dev/" : "/dev/disk/by-path/";
  return (s) => (s.startsWith("/dev/") ? s : prefix + s);
}

const STRING_OPS = ["s==", "s!=", "s<=", "s>=", "s<", "s>", "<in>", "<all-in>"] as const;
type StringOp = (typeof STRING_OPS)[number];

function matchString(value: string, expression: string, normalise: (s: string) => string): boolean {
  const actual = value.toLowerCase();
  const trimmed = expression.trim();
  if (trimmed.startsWith("<or>")) {
    const options = trimmed
      .split("<or>")
      .map((part) => part.trim())
      .filter((part) => part.length > 0);
    return options.some((option) => matchString(value, option, normalise));
  }
  const op = STRING_OPS.find((candidate) => trimmed.startsWith(candidate + " ") || trimmed === candidate);
  const operand = (op === undefined ? trimmed : trimmed.slice(op.length)).trim();
  const expected =
    op === "<in>" || op === "<all-in>" ? operand.toLowerCase() : normalise(operand).toLowerCase();
  return compareStrings(op ?? "s==", actual, expected);
}

function compareStrings(op: StringOp, actual: string, expected: string): boolean {
  switch (op) {
    case "s==":
      return actual === expected;
    case "s!=":
      return actual !== expected;
    case "s<":
      return actual < expected;
    case "s<=":
      return actual <= expected;
    case "s>":
      return actual > expected;
    case "s>=":
      return actual >= expected;
    case "<in>":
      return actual.includes(expected);
    case "<all-in>":
      return expected.split(/\s+/).every((word) => actual.includes(word));
  }
}

const NUMERIC_OPS = ["==", "!=", ">=", "<=", ">", "<", "="] as const;

function matchSize(actualGib: number, hint: number | string): boolean {
  if (typeof hint === "number") return actualGib === hint;
  const trimmed = hint.trim();
  if (trimmed.startsWith("<or>")) {
    return trimmed
      .split("<or>")
      .map((part) => part.trim())
      .filter((part) => part.length > 0)
      .some((part) => matchSize(actualGib, part));
  }
  const op = NUMERIC_OPS.find((candidate) => trimmed.startsWith(candidate));
  const operand = Number((op === undefined ? trimmed : trimmed.slice(op.length)).trim());
  if (!Number.isFinite(operand))
    throw new Error(`root device hint size: cannot parse ${JSON.stringify(hint)}`);
  switch (op ?? "==") {
    case "==":
      return actualGib === operand;
    case "!=":
      return actualGib !== operand;
    case ">=":
    case "=": // oslo's specs matcher reads a lone "=" as "at least"
      return actualGib >= operand;
    case "<=":
      return actualGib <= operand;
    case ">":
      return actualGib > operand;
    case "<":
      return actualGib < operand;
    default:
      return false;
  }
}

function parseBool(value: boolean | string): boolean {
  if (typeof value === "boolean") return value;
  const normalised = value.trim().toLowerCase();
  if (["true", "1", "yes", "on", "y", "t"].includes(normalised)) return true;
  if (["false", "0", "no", "off", "n", "f"].includes(normalised)) return false;
  throw new Error(`root device hint rotational: cannot parse ${JSON.stringify(value)}`);
}
