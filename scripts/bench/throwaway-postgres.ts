import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A PostgreSQL server of a bench's own, from scripts/setup/postgres.sh (initdb + pg_ctl in a temp dir). */
export interface ThrowawayPostgres {
  /** The server's directory (its data directory is `data/` inside). */
  readonly dir: string;
  /** Starts the server; its connection URL. */
  start(): string;
  /** Stops the server if it was started and removes its directory; never throws. */
  stop(): void;
}

export function throwawayPostgres(prefix: string): ThrowawayPostgres {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return {
    dir,
    start: () =>
      execFileSync("bash", ["scripts/setup/postgres.sh", "start", dir], { encoding: "utf8" }).trim(),
    stop: () => {
      try {
        execFileSync("bash", ["scripts/setup/postgres.sh", "stop", dir], { stdio: "ignore" });
      } catch {
        // never started
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
