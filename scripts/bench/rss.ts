import { readFileSync } from "node:fs";

/** A memory figure of a process from /proc/<pid>/status (resident now, or its high-water mark) in MiB. */
export function statusMiB(pid: number, field: "VmRSS" | "VmHWM"): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024;
}

/** A process's resident set in MiB. */
export const rssMiB = (pid: number): number => statusMiB(pid, "VmRSS");
