import { spawn } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

// NOTE: the shared exec module runs children to completion; the lab's daemons must outlive `lab up`,
// so they are spawned here: detached (own session), stdio to a log file, and known only by pid.

/** Starts a program in its own session with stdin closed and stdout/stderr appended to log; returns its pid. */
export function spawnDetached(
  command: string,
  args: string[],
  options: { log: string; cwd?: string; env?: Record<string, string> },
): number {
  const out = openSync(options.log, "a");
  try {
    const child = spawn(command, args, {
      detached: true,
      stdio: ["ignore", out, out],
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
    });
    if (child.pid === undefined) throw new Error(`could not start ${command}`);
    child.unref();
    return child.pid;
  } finally {
    closeSync(out);
  }
}

/** True while the process runs; a zombie (exited, not yet reaped by PID 1) counts as gone. */
export function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false; // kill(0, …) would signal our own group
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return true; // no procfs: trust kill(0)
  }
}

/** SIGTERM, then SIGKILL after graceMs; resolves once the pid is gone. */
export async function stopPid(pid: number, graceMs = 5000): Promise<void> {
  if (!alive(pid)) return;
  process.kill(pid, "SIGTERM");
  const deadline = Date.now() + graceMs;
  while (alive(pid) && Date.now() < deadline) await sleep(100);
  if (alive(pid)) process.kill(pid, "SIGKILL");
  while (alive(pid)) await sleep(50);
}
