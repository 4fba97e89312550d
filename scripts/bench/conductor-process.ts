import { execFile, spawn, type ChildProcess } from "node:child_process";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { CONDUCTOR_ENTRY, buildConductor } from "../build/conductor.ts";

/**
 * How a bench runs a conductor: `built` (the default) runs the esbuild bundle, as the installed service does;
 * `tsx` runs the TypeScript sources through tsx's loader, as `npm start` does. BENCH_CONDUCTOR=tsx picks the latter.
 */
export type ConductorRun = "built" | "tsx";
export const BENCH_CONDUCTOR_RUN: ConductorRun = process.env.BENCH_CONDUCTOR === "tsx" ? "tsx" : "built";

/** The builds made in this process, by checkout. */
const builds = new Map<string, Promise<unknown>>();

/**
 * Builds the conductor bundle of a checkout (`cwd`, default this one) with this checkout's build, so that a
 * baseline revision runs from the same kind of bundle as this checkout; once per checkout and process. Nothing to
 * do for `tsx`. `ownBuild` builds it with the checkout's own scripts/build/conductor.ts instead (a change to the
 * build itself, measured against the revision as it builds).
 */
export async function prepareBenchConductor(
  cwd?: string,
  run: ConductorRun = BENCH_CONDUCTOR_RUN,
  options: { ownBuild?: boolean } = {},
): Promise<void> {
  if (run !== "built") return;
  const root = resolve(cwd ?? ".");
  if (!builds.has(root))
    builds.set(
      root,
      options.ownBuild
        ? promisify(execFile)(process.execPath, ["--import", "tsx", "scripts/build/conductor.ts"], {
            cwd: root,
          })
        : buildConductor({ root }),
    );
  await builds.get(root);
}

/** node's arguments that start a checkout's conductor, before the conductor's own. */
export function conductorCommand(run: ConductorRun = BENCH_CONDUCTOR_RUN): string[] {
  return run === "built" ? [CONDUCTOR_ENTRY] : ["--import", "tsx", "conductor/main.ts"];
}

/**
 * A conductor as its own process for a benchmark: a SQLite file in `dir` (or `options.db`, e.g. a PostgreSQL URL),
 * an OS-chosen port, no power sync; resolves with the URL it logs once listening. `options.cwd` runs another
 * checkout's conductor (a baseline revision); `options.nodeArgs` go to node itself (`--cpu-prof`, heap flags).
 * A `built` run builds that checkout's bundle first (once per process; prepareBenchConductor() does it earlier).
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
    run?: ConductorRun;
    /** A bundle other than the checkout's build/conductor/main.js (a variant under comparison). */
    entry?: string;
  } = {},
): Promise<{ child: ChildProcess; url: string }> {
  if (options.entry === undefined) await prepareBenchConductor(options.cwd, options.run);
  const child = spawn(
    process.execPath,
    [
      ...(options.nodeArgs ?? []),
      ...(options.entry === undefined ? conductorCommand(options.run) : [options.entry]),
      ...["--port", "0"],
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
