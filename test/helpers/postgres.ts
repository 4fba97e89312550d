import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";

const run = promisify(execFile);
const SCRIPT = "scripts/setup/postgres.sh";

export interface ThrowawayPostgres {
  /** postgresql://anvil@127.0.0.1:PORT/anvil */
  url: string;
  /** A new empty database on the same server; returns its URL. */
  freshDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

/**
 * Starts a real PostgreSQL from Debian's packages in a temp dir (scripts/setup/postgres.sh).
 * @throws with the server's own message when it cannot start: a test never skips for want of one
 */
export async function startPostgres(): Promise<ThrowawayPostgres> {
  const dir = mkdtempSync(join(tmpdir(), "anvil-pg-"));
  let url: string;
  try {
    url = (await run("bash", [SCRIPT, "start", dir], { timeout: 120_000 })).stdout.trim();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    const stderr = error instanceof Error && "stderr" in error ? String(error.stderr) : "";
    throw new Error(`PostgreSQL did not start (${SCRIPT}): ${stderr || String(error)}`);
  }
  return {
    url,
    async freshDatabase(name) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE "${name.replace(/[^a-z0-9_]/g, "_")}"`);
      } finally {
        await client.end();
      }
      return url.replace(/\/anvil$/, `/${name.replace(/[^a-z0-9_]/g, "_")}`);
    },
    async stop() {
      await run("bash", [SCRIPT, "stop", dir], { timeout: 60_000 }).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
