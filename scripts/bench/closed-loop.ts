import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { conductorCommand } from "./conductor-process.ts";
import { percentile } from "./percentile.ts";

/**
 * Runs `count` jobs, `concurrency` at a time, each client starting its next job when its last one ends; each
 * job's latency (ms) at p50 and p99, every latency (sorted), and the rate.
 */
export async function closedLoop(
  count: number,
  concurrency: number,
  job: (i: number) => Promise<void>,
): Promise<{ perS: number; p50: number; p99: number; times: number[] }> {
  const times: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        const t = performance.now();
        await job(i);
        times.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  times.sort((a, b) => a - b);
  return { perS: count / seconds, p50: percentile(times, 50), p99: percentile(times, 99), times };
}

/**
 * A checkout's conductor on an OS-chosen port with `args` (`nodeArgs` go to node itself); resolves with the
 * URL it logs once listening.
 */
export async function spawnListeningConductor(
  checkout: string,
  args: readonly string[],
  nodeArgs: readonly string[] = [],
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [...nodeArgs, ...conductorCommand(), "--port", "0", ...args], {
    cwd: checkout,
    stdio: ["ignore", "ignore", "pipe"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stderr! }).on("line", (line) => {
      const match = /"url":"(http:\/\/[^"]+)"/.exec(line);
      if (match?.[1]) resolve(match[1]);
    });
    child.on("exit", (code) => reject(new Error(`conductor exited ${code}`)));
  });
  return { child, url };
}
