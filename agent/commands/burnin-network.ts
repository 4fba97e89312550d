import { setTimeout as sleep } from "node:timers/promises";
import type { FioJobResult } from "../../shared/burnin.ts";
import { CodedError } from "../../shared/errors.ts";
import { parseFioJson, tail } from "../hardware/burnin-output.ts";
import type { CommandContext, CommandHandler } from "./command.ts";

const DEFAULT_RUNTIME_S = 21_600;
const DEFAULT_PORT = 9000;
const DEFAULT_RETRY_S = 30;
/** How long a reader waits for its writer, all attempts together (IPA's pairing timeout default). */
const READER_WAIT_S = 900;
/** The reader's partner is not listening (yet): fio's connect failed. */
const NOT_LISTENING = /Connection refused|Connection timed out|No route to host/i;
/** The same as the job's errno: ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH. */
const NOT_LISTENING_ERRNOS = new Set([111, 110, 113]);
/**
 * A reader lets its writer, which starts at the same moment, set up all its 16 listeners first: fio's
 * reader connecting while only some listen fails, and the connections it did make leave the writer's jobs
 * with dead sockets (measured: 2 runs in 3 hung on loopback without this pause, 0 in 6 with the writer ready).
 */
const READER_SETTLE_MS = 2000;
/** A writer's port is still held (EADDRINUSE): a fio that used it is still closing. */
const PORT_HELD = 98;

type Role = "writer" | "reader";

/**
 * fio's arguments for one side of IPA's network test (its burnin.py's): 16 TCP streams, the writer listening
 * on `port` for `runtime` seconds, the reader connecting to `partner`. A partner that is no Anvil node (a
 * test's host side) runs the same.
 */
export function fioNetworkArgs(
  role: Role,
  settings: { partner: string; runtime: number; port: number },
): string[] {
  return [
    "--ioengine=net",
    `--port=${settings.port}`,
    "--fill_device=1",
    "--group_reporting",
    "--gtod_reduce=1",
    "--numjobs=16",
    ...(role === "writer"
      ? ["--name=writer", "--rw=write", `--runtime=${settings.runtime}`, "--time_based", "--listen"]
      : ["--name=reader", "--rw=read", `--hostname=${settings.partner}`]),
    "--output-format=json",
  ];
}

/** One direction of IPA's fio network test: the writer listens and writes, the reader connects and reads. */
async function direction(
  role: Role,
  settings: { partner: string; runtime: number; port: number; retryS: number },
  context: CommandContext,
): Promise<FioJobResult & { role: Role }> {
  const { backend, signal, progress, logger } = context;
  const args = fioNetworkArgs(role, settings);
  const deadline = Date.now() + READER_WAIT_S * 1000;
  if (role === "reader") await sleep(READER_SETTLE_MS, undefined, { signal });
  for (;;) {
    progress({ step: "burnin_network", message: `fio (network) as ${role} with ${settings.partner}` });
    let run;
    try {
      run = await backend.burnin.fio(args, { signal, timeoutMs: (settings.runtime + READER_WAIT_S) * 1000 });
    } catch (error) {
      if (signal.aborted) throw error;
      throw new CodedError("COMMAND_FAILED", `burnin_network: fio failed: ${(error as Error).message}`);
    }
    const jobs = parseFioJson(run.stdout);
    logger.info({ role, code: run.code, jobs }, "fio (network) done");
    const job = jobs?.[0];
    if (run.code === 0 && job !== undefined && job.error === 0 && job.total_errors === 0)
      return { role, ...job };
    // as IPA: the reader retries while its writer is not listening yet; a writer's failure is final.
    // NOTE: with --output-format=json fio prints its "fio: pid=…, error=Connection refused" lines on stdout,
    // before the report, so the errno in the report is what tells.
    const notListening =
      NOT_LISTENING_ERRNOS.has(job?.error ?? 0) || NOT_LISTENING.test(`${run.stderr}\n${run.stdout}`);
    // and a writer whose port a closing fio still holds (two nodes on one host: tests) tries again too
    const portHeld = role === "writer" && job?.error === PORT_HELD;
    if (((role === "reader" && notListening) || portHeld) && Date.now() < deadline) {
      logger.info(
        { retryS: settings.retryS, role },
        portHeld
          ? "fio (network): the port is still held; retrying"
          : "fio (network): the writer is not listening yet; retrying",
      );
      await sleep(settings.retryS * 1000, undefined, { signal });
      continue;
    }
    const why =
      job !== undefined && job.error !== 0 ? `error ${job.error}` : `exit status ${run.code ?? run.signal}`;
    throw new CodedError(
      "COMMAND_FAILED",
      `burnin_network: fio (network) as ${role} with ${settings.partner} failed (${why}): ${tail(run.stderr)}`,
    );
  }
}

/**
 * burnin_network (IPA's burnin.fio_network with a static pairing): fio's net engine between this node and its
 * partner, first in the given role, then the other way round, `runtime` seconds each; the MB/s of each
 * direction is the result.
 * @throws CodedError COMMAND_FAILED when fio fails or finds errors, or the partner never listens.
 */
export const burninNetwork: CommandHandler<"burnin_network"> = async (args, context) => {
  const settings = {
    partner: args.partner,
    runtime: args.runtime ?? DEFAULT_RUNTIME_S,
    port: args.port ?? DEFAULT_PORT,
    retryS: args.retry_interval ?? DEFAULT_RETRY_S,
  };
  const other: Role = args.role === "writer" ? "reader" : "writer";
  const first = await direction(args.role, settings, context);
  const second = await direction(other, settings, context);
  return { tool: "fio", partner: args.partner, runtime_s: settings.runtime, directions: [first, second] };
};
