import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

/**
 * CPU milliseconds of a process from /proc/<pid>/stat (USER_HZ 100): its own (utime + stime) and its reaped
 * children's (cutime + cstime). Fields are counted after the ")" that closes its name, which may hold spaces.
 */
export function processCpu(pid: number | "self"): { own: number; children: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ms = (i: number): number => Number(fields[i]) * 10;
  return { own: ms(11) + ms(12), children: ms(13) + ms(14) };
}

/** A process's own CPU milliseconds; 0 once it is gone. */
export function processCpuMs(pid: number): number {
  try {
    return processCpu(pid).own;
  } catch {
    return 0;
  }
}

/**
 * CPU milliseconds used by a PostgreSQL server: its postmaster, the backends it runs and those it has reaped.
 * NOTE: a backend that ends (a closed connection, an autovacuum worker) leaves the live sum and enters the
 * postmaster's reaped children's: counting the live ones alone made a reading fall when one ended.
 */
export function serverCpuMs(dataDir: string): number {
  const postmaster = Number(readFileSync(join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
  let sum: number;
  try {
    const { own, children } = processCpu(postmaster);
    sum = own + children;
  } catch {
    return 0;
  }
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === postmaster) sum += processCpuMs(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return sum;
}
