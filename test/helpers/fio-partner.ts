import { createServer } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { fioNetworkArgs } from "../../agent/commands/burnin-network.ts";
import { parseFioJson } from "../../agent/hardware/burnin-output.ts";
import type { FioJobResult } from "../../shared/burnin.ts";
import { exec } from "../../shared/system/exec.ts";

/** A TCP port nothing on 127.0.0.1 listens on now. */
export async function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

/**
 * The host's side of burnin_network: Debian's fio with the agent's own arguments. A writer listens on `port`
 * (fio's net engine binds every address; its partner reaches it on loopback) for `runtime` seconds; a reader
 * connects to 127.0.0.1:`port` and, until `deadline`, retries while it reads nothing (a slirp forward accepts
 * before the guest's writer listens, then closes). Resolves with fio's one job, or throws with its stderr.
 */
export async function fioPartner(
  role: "writer" | "reader",
  settings: { port: number; runtime: number; deadline: number },
): Promise<FioJobResult> {
  const args = fioNetworkArgs(role, { partner: "127.0.0.1", port: settings.port, runtime: settings.runtime });
  for (;;) {
    const run = await exec("fio", args, { timeoutMs: Math.max(1000, settings.deadline - Date.now()) });
    const job = parseFioJson(run.stdout)?.[0];
    if (run.code === 0 && job !== undefined && job.error === 0 && job.read_bytes + job.write_bytes > 0) {
      return job;
    }
    if (role === "writer" || Date.now() > settings.deadline) {
      throw new Error(`host fio (${role}) exited with ${run.code}: ${run.stderr.slice(-2000)}`);
    }
    await sleep(500);
  }
}
