import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

/** CPU milliseconds (user + system) a process has used, from /proc/<pid>/stat (USER_HZ 100); 0 once it is gone. */
export function processCpuMs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}

/** CPU milliseconds used by a PostgreSQL server: its postmaster and every backend it forked. */
export function serverCpuMs(dataDir: string | undefined): number {
  if (!dataDir) return 0;
  const postmaster = Number(readFileSync(join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
  let sum = processCpuMs(postmaster);
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
      if (ppid === postmaster) sum += processCpuMs(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return sum;
}
