import type { ExecResult } from "../../../shared/system/exec.ts";
import type { BurninTools } from "../burnin-tools.ts";
import type { ToolCall } from "../disk-tools.ts";

/** The blocks a simulated failing disk reports bad. */
const BAD_BLOCKS = [1024, 1025, 40_000];

/** The burn-in a simulated machine can be told to fail (`burnin_failing` in its machine file). */
export type SimulatedBurnin = "cpu" | "memory" | "disk" | "disk-stall" | "network";

/** A tool waiting on a disk that never answers: it ends only when stopped, with the stop's reason. */
function untilStopped(options: ToolCall): Promise<never> {
  return new Promise((_, reject) => {
    const stop = () => reject(options.signal?.reason ?? new Error("aborted"));
    if (options.signal?.aborted) stop();
    else options.signal?.addEventListener("abort", stop, { once: true });
  });
}

/** The value following `--name` (separate, or as `--name=value`). */
function optionValues(args: readonly string[], name: string): string[] {
  const values: string[] = [];
  args.forEach((arg, index) => {
    if (arg === `--${name}` && index + 1 < args.length) values.push(args[index + 1]!);
    else if (arg.startsWith(`--${name}=`)) values.push(arg.slice(name.length + 3));
  });
  return values;
}

/**
 * A simulated machine runs no stress: stress-ng and fio answer at once, in the real tools' output formats
 * (stress-ng 0.15's metrics lines, fio 3.33's JSON, badblocks 1.47's -w -v lines), with fixed figures; a burn-in the machine file names
 * in `burnin_failing` reports errors and exits non-zero, as a dying part would.
 */
export class SimulatedBurninTools implements BurninTools {
  private completed = 0;

  constructor(private readonly failing: ReadonlySet<SimulatedBurnin> = new Set()) {}

  async stressNg(args: readonly string[]): Promise<ExecResult> {
    const stressor = args[0] === "--vm" ? "vm" : "cpu";
    const seconds = Number(optionValues(args, "timeout")[0] ?? "1");
    const fails = this.failing.has(stressor === "vm" ? "memory" : "cpu");
    const ops = stressor === "vm" ? 9000 * seconds : 400 * seconds;
    const lines = [
      `stress-ng: info:  [4242] setting to a ${seconds} second run per stressor`,
      `stress-ng: info:  [4242] dispatching hogs: 1 ${stressor}`,
      ...(fails ? [`stress-ng: fail:  [4243] ${stressor}: detected 3 bit errors while verifying`] : []),
      "stress-ng: metrc: [4242] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s",
      "stress-ng: metrc: [4242]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)",
      `stress-ng: metrc: [4242] ${stressor.padEnd(12)} ${String(ops).padStart(10)} ${seconds.toFixed(2).padStart(9)}      1.00      0.00 ${(ops / seconds).toFixed(2).padStart(12)} ${ops.toFixed(2).padStart(14)}`,
      fails
        ? "stress-ng: info:  [4242] unsuccessful run completed"
        : `stress-ng: info:  [4242] successful run completed in ${seconds}.00s`,
    ];
    return { code: fails ? 2 : 0, signal: null, stdout: "", stderr: lines.join("\n") + "\n" };
  }

  async fio(args: readonly string[], options: ToolCall = {}): Promise<ExecResult> {
    const network = args.includes("--ioengine=net") || optionValues(args, "ioengine")[0] === "net";
    // a disk that stopped answering: fio waits on it until it is stopped
    if (!network && this.failing.has("disk-stall")) return untilStopped(options);
    const fails = this.failing.has(network ? "network" : "disk");
    const names = optionValues(args, "name");
    const io = (bytes: number) => ({
      io_bytes: bytes,
      bw: Math.round(bytes / 1024),
      iops: bytes / 4096,
      runtime: 1000,
    });
    const jobs = names.map((jobname) => ({
      jobname,
      error: fails ? 5 : 0,
      job_runtime: 1000,
      read: io(network && jobname === "writer" ? 0 : 64 << 20),
      write: io(network && jobname === "reader" ? 0 : 64 << 20),
      total_err: fails ? 12 : 0,
    }));
    const report = { "fio version": "fio-3.33 (simulated)", jobs };
    return {
      code: fails ? 1 : 0,
      signal: null,
      stdout: JSON.stringify(report, null, 2),
      stderr: fails ? "fio: io_u error on file: Input/output error: read offset=4096, buflen=4096\n" : "",
    };
  }

  /** Every look finds more I/O done, except on a stalled disk. */
  async ioCompleted(): Promise<number | null> {
    if (!this.failing.has("disk-stall")) this.completed += 64;
    return this.completed;
  }

  /** A 64 MiB disk (16384 blocks of 4 KiB): each -t pattern written, then read and compared. */
  async badblocks(args: readonly string[], options: ToolCall = {}): Promise<ExecResult> {
    if (this.failing.has("disk-stall")) return untilStopped(options);
    const fails = this.failing.has("disk");
    const patterns = args.flatMap((arg, i) => (arg === "-t" && i + 1 < args.length ? [args[i + 1]!] : []));
    const lines = ["Checking for bad blocks in read-write mode", "From block 0 to 16383"];
    for (const pattern of patterns) {
      lines.push(`Testing with pattern ${pattern}: done${" ".repeat(49)}`);
      lines.push(`Reading and comparing: done${" ".repeat(49)}`);
    }
    const found = fails ? BAD_BLOCKS.length : 0;
    lines.push(`Pass completed, ${found} bad blocks found. (0/0/${found} errors)`);
    return {
      code: 0,
      signal: null,
      stdout: fails ? BAD_BLOCKS.map((block) => `${block}\n`).join("") : "",
      stderr: lines.join("\n") + "\n",
    };
  }
}
