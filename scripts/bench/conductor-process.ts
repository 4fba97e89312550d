import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";

/**
 * A conductor as its own process for a benchmark: a SQLite file in `dir` (or `options.db`, e.g. a PostgreSQL URL),
 * an OS-chosen port, no power sync; resolves with the URL it logs once listening. `options.cwd` runs another
 * checkout's conductor (a baseline revision); `options.nodeArgs` go to node itself (`--cpu-prof`, heap flags).
 */
export async function startBenchConductor(
  dir: string,
  options: {
    args?: readonly string[];
    env?: Record<string, string>;
    name?: string;
    db?: string;
    cwd?: string;
    nodeArgs?: readonly string[];
  } = {},
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    [
      ...(options.nodeArgs ?? []),
      ...["--import", "tsx", "conductor/main.ts", "--port", "0"],
      ...["--db", options.db ?? join(dir, "bench.sqlite"), "--data-dir", dir, "--power-sync-interval", "0"],
      ...(options.args ?? []),
    ],
    {
      cwd: options.cwd,
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, ANVIL_LOG_LEVEL: "info", ...options.env },
    },
  );
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stderr! }).on("line", (line) => {
      const match = /"url":"(https?:\/\/[^"]+)"/.exec(line);
      if (match?.[1]) resolve(match[1]);
    });
    child.on("exit", (code) =>
      reject(new Error(`conductor${options.name ? ` (${options.name})` : ""} exited ${code}`)),
    );
  });
  return { child, url };
}
