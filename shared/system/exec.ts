import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";

/** What a child process left behind. */
export interface ExecResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface ExecOptions {
  /** Extra environment, merged over a minimal base; the place for secrets (never argv). */
  env?: Record<string, string>;
  /** Kill the child after this many milliseconds (SIGKILL) and reject with ExecTimeoutError. */
  timeoutMs?: number;
  /**
   * Interrupt the child (SIGINT) after this many milliseconds and still resolve with what it wrote: a run
   * bounded by time, such as badblocks, which prints the block it reached when interrupted.
   */
  stopAfterMs?: number;
  signal?: AbortSignal;
  /** Bytes written to the child's stdin, then closed. */
  input?: string | Buffer;
  cwd?: string;
}

export class ExecTimeoutError extends Error {
  constructor(
    readonly command: string,
    readonly timeoutMs: number,
  ) {
    super(`${command} timed out after ${timeoutMs} ms`);
    this.name = "ExecTimeoutError";
  }
}

/**
 * Where the machine's trusted CAs are (public paths, no secret): a child that downloads (Node's fetch, curl,
 * apt) must trust what this process trusts, or a network that inspects TLS with its own CA breaks it.
 */
const CA_VARIABLES = ["NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR"] as const;

/**
 * The child's whole environment, from an allowlist: PATH, LANG=C, the CA locations (CA_VARIABLES) and the
 * caller's own keys. A null-prototype object read with Object.keys, so nothing inherited (a polluted
 * Object.prototype) can ever reach a child.
 */
export function childEnvironment(extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  const env = Object.create(null) as Record<string, string>;
  env.PATH = process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin";
  env.LANG = "C";
  for (const key of CA_VARIABLES) {
    const value = process.env[key];
    if (typeof value === "string") env[key] = value;
  }
  for (const key of Object.keys(extra)) {
    const value = extra[key];
    if (typeof value === "string") env[key] = value;
  }
  return env;
}

/** Observes every spawn (tests use it to prove secrets never reach argv). */
export type SpawnObserver = (command: string, args: readonly string[]) => void;
const observers = new Set<SpawnObserver>();
export function observeSpawns(observer: SpawnObserver): () => void {
  observers.add(observer);
  return () => observers.delete(observer);
}

/**
 * Runs a program with an argv array (never a shell string) and collects its output.
 * Resolves whatever the exit code is; callers decide what a failure is.
 * @throws ExecTimeoutError when timeoutMs passes; the AbortSignal's reason when aborted; spawn errors (ENOENT).
 */
export function exec(
  command: string,
  args: readonly string[],
  options: ExecOptions = {},
): Promise<ExecResult> {
  for (const observer of observers) observer(command, args);
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: childEnvironment(options.env),
      stdio: ["pipe", "pipe", "pipe"],
      // its own process group, so a stop reaches what it forked too (fio's jobs, stress-ng's workers)
      detached: true,
    });
    const kill = (signal: NodeJS.Signals): void => killGroup(child, signal);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let settled = false;
    const finish = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(stop);
      options.signal?.removeEventListener("abort", onAbort);
      fn();
    };
    const stop =
      options.stopAfterMs === undefined ? undefined : setTimeout(() => kill("SIGINT"), options.stopAfterMs);
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            kill("SIGKILL");
            finish(() => reject(new ExecTimeoutError(command, options.timeoutMs ?? 0)));
          }, options.timeoutMs);
    const onAbort = (): void => {
      kill("SIGKILL");
      finish(() => reject(options.signal?.reason ?? new Error("aborted")));
    };
    if (options.signal?.aborted) return onAbort();
    options.signal?.addEventListener("abort", onAbort, { once: true });
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => err.push(chunk));
    child.on("error", (error) => finish(() => reject(error)));
    child.on("close", (code, signal) =>
      finish(() =>
        resolve({
          code,
          signal,
          stdout: Buffer.concat(out).toString(),
          stderr: Buffer.concat(err).toString(),
        }),
      ),
    );
    child.stdin.on("error", () => undefined); // a child that exits early closes its stdin: not our error
    child.stdin.end(options.input);
  });
}

/**
 * Signals a child's whole process group (exec starts each child as a group's leader). Killing the leader
 * alone left fio's 16 forked jobs running on after a timeout or an abort, each spinning on a core or still
 * writing the disk the next step writes.
 */
function killGroup(
  child: { pid?: number | undefined; kill(signal: NodeJS.Signals): boolean },
  signal: NodeJS.Signals,
) {
  try {
    if (child.pid !== undefined) return void process.kill(-child.pid, signal);
  } catch {
    // the group is gone already (or never formed): signal the child itself
  }
  child.kill(signal);
}

/**
 * Starts a long-lived program (a console session) with an argv array and the same allowlisted environment as
 * exec; the caller owns its streams and its end. Spawn observers see it as they see exec's.
 */
export function spawnStreaming(
  command: string,
  args: readonly string[],
  options: Pick<ExecOptions, "env" | "cwd"> = {},
): ChildProcessWithoutNullStreams {
  for (const observer of observers) observer(command, args);
  return spawn(command, args, { cwd: options.cwd, env: childEnvironment(options.env), stdio: "pipe" });
}

/**
 * Starts a daemon that outlives this process (the ramdisk's DHCP client after `netconfig` exits): its own
 * session, this process's stdout/stderr (the console), the same allowlisted environment. Resolves once it runs.
 * @throws spawn errors (ENOENT)
 */
export function startDetached(command: string, args: readonly string[]): Promise<number> {
  for (const observer of observers) observer(command, args);
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      env: childEnvironment(),
      detached: true,
      stdio: ["ignore", "inherit", "inherit"],
    });
    child.once("error", reject);
    child.once("spawn", () => {
      child.unref();
      resolve(child.pid ?? 0);
    });
  });
}
