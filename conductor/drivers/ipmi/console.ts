import { spawnStreaming } from "../../../shared/system/exec.ts";
import type { ConsoleConnection, ConsoleInterface, ConsoleSink } from "../console/console.ts";
import { DriverError } from "../errors.ts";
import type { DriverNode } from "../out-of-band.ts";
import { parseIpmiDriverInfo } from "./driver-info.ts";
import type { Ipmitool } from "./ipmitool.ts";

/** What stderr keeps for the reason a session ended (ipmitool -v is chatty; the last lines say why). */
const STDERR_TAIL_BYTES = 2048;
/**
 * Keystrokes waiting for ipmitool to read them, at most: a serial line takes ~11 KB/s at 115200 baud, so more
 * than this is a viewer flooding a stuck session, and what exceeds it is dropped rather than held in memory.
 */
const MAX_PENDING_INPUT_BYTES = 64 * 1024;
/** A session asked to close gets this long after its stdin ends, then SIGKILL. */
const CLOSE_GRACE_MS = 2000;

function lastLine(text: string): string {
  const lines = text
    .split("\n")
    .map((line) => line.trim())
    // "tcgetattr: Inappropriate ioctl for device": ipmitool's stdin is a pipe here, never a terminal
    .filter((line) => line !== "" && !line.startsWith("tcgetattr"));
  return lines.filter((line) => /error|unable|closed|deactivat/i.test(line)).pop() ?? lines.pop() ?? "";
}

/**
 * Serial-over-LAN through `ipmitool sol activate` (Ironic's ipmitool-socat, with the conductor itself as the
 * relay instead of socat): a stale SOL payload is deactivated first (a BMC allows one), then one long-lived
 * ipmitool whose stdout is the serial port's output and whose stdin takes keystrokes. The password travels in
 * IPMI_PASSWORD as for every other ipmitool call, never in argv.
 */
export class IpmitoolConsole implements ConsoleInterface {
  readonly name = "ipmitool-socat";

  constructor(private readonly options: { ipmitool: Ipmitool }) {}

  validate(node: DriverNode): void {
    parseIpmiDriverInfo(node.driver_info);
  }

  async open(node: DriverNode, sink: ConsoleSink): Promise<ConsoleConnection> {
    const info = parseIpmiDriverInfo(node.driver_info);
    const { ipmitool } = this.options;
    // NOTE: a session left by a dead conductor (or another tool) makes `activate` fail with "SOL payload
    // already active on another session"; deactivating an inactive payload is harmless, so its failure is too
    await ipmitool.run(info, ["sol", "deactivate"]).catch(() => undefined);
    const { binary, args, env } = ipmitool.invocation(info, ["sol", "activate"]);
    const child = spawnStreaming(binary, args, { env });
    let stderr = "";
    let closing = false;
    child.stdout.on("data", (chunk: Buffer) => sink.data(chunk));
    child.stderr.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString("latin1")).slice(-STDERR_TAIL_BYTES);
    });
    child.stdin.on("error", () => undefined); // an exiting ipmitool closes its stdin: the exit says why
    const exited = new Promise<void>((resolve) => {
      child.once("close", (code, signal) => {
        resolve();
        if (closing) return;
        const why = lastLine(stderr);
        sink.closed(`ipmitool sol activate ended (${signal ?? `exit ${code}`})${why ? `: ${why}` : ""}`);
      });
    });
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", (error) => reject(new DriverError(`ipmitool could not start: ${error.message}`)));
    });
    return {
      write: (chunk) => {
        if (closing || !child.stdin.writable) return;
        if (child.stdin.writableLength + chunk.length > MAX_PENDING_INPUT_BYTES) return;
        child.stdin.write(chunk);
      },
      close: async () => {
        if (closing) return exited;
        closing = true;
        // end of input makes ipmitool leave the session cleanly (the BMC frees the SOL payload at once)
        child.stdin.end();
        const kill = setTimeout(() => child.kill("SIGKILL"), CLOSE_GRACE_MS);
        await exited;
        clearTimeout(kill);
      },
    };
  }
}
