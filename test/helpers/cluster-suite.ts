import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { startPostgres, type ThrowawayPostgres } from "./postgres.ts";

/** A suite of conductor processes on one PostgreSQL: what its tests share, and what they leave for the end. */
export interface ClusterSuite {
  /** The suite's server (started before its first test). */
  readonly pg: ThrowawayPostgres;
  /** Data directories and config files. */
  readonly dir: string;
  /** Conductor processes the tests started: killed after the last test. */
  readonly children: ChildProcess[];
}

/** Starts a PostgreSQL before the suite's tests; after them kills its conductors and removes the server. */
export function clusterSuite(prefix: string): ClusterSuite {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const children: ChildProcess[] = [];
  let server: ThrowawayPostgres | undefined;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL");
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    get pg() {
      if (server === undefined) throw new Error("the suite's PostgreSQL has not started");
      return server;
    },
    dir,
    children,
  };
}
