import { spawn, type ChildProcess } from "node:child_process";
import { appendFileSync, createWriteStream, existsSync, rmSync, statSync } from "node:fs";
import { rename } from "node:fs/promises";
import { dirname, join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { connect, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type { Machine, MachinePower, MachineReset } from "./machine.ts";

/** A QMP command: its name, or its name with arguments. */
export type QmpCommand = string | { execute: string; arguments: Record<string, unknown> };

/** One QMP exchange: connect, negotiate capabilities, run a command, return its "return" value. */
export async function qmp(socketPath: string, command: QmpCommand, timeoutMs = 5000): Promise<unknown> {
  const execute = typeof command === "string" ? command : command.execute;
  const socket: Socket = connect(socketPath);
  socket.setEncoding("utf8");
  let buffer = "";
  const lines: unknown[] = [];
  let wake: (() => void) | undefined;
  socket.on("data", (chunk: string) => {
    buffer += chunk;
    for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
      const line = buffer.slice(0, nl).trim();
      buffer = buffer.slice(nl + 1);
      if (line) lines.push(JSON.parse(line));
      wake?.();
    }
  });
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  socket.on("error", () => wake?.());
  const next = async (): Promise<Record<string, unknown>> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const line = lines.shift() as Record<string, unknown> | undefined;
      if (line && !("event" in line)) return line;
      if (line) continue;
      if (socket.destroyed || Date.now() > deadline) throw new Error(`QMP ${execute}: no answer`);
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, 50).unref();
      });
    }
  };
  try {
    await next(); // greeting
    socket.write(JSON.stringify({ execute: "qmp_capabilities" }) + "\n");
    await next();
    socket.write(JSON.stringify(typeof command === "string" ? { execute } : command) + "\n");
    // `quit` may close the socket before answering: that is the answer
    const answer = await next().catch((error: unknown) => {
      if (execute === "quit") return { return: {} };
      throw error;
    });
    if ("error" in answer) throw new Error(`QMP ${execute}: ${JSON.stringify(answer.error)}`);
    return answer.return;
  } finally {
    socket.end();
    await Promise.race([closed, sleep(200)]);
  }
}

// the virtual CD's drive and device (IDE secondary master, where -cdrom would sit on the pc machine)
const CD_DRIVE = "vmedia";
const CD_ID = "vmedia-cd";

export interface QemuMachineOptions {
  /** QEMU's argv without -qmp and -boot (the node's disks, NIC, memory...). */
  argv: readonly string[];
  qmpSocket: string;
  binary?: string;
  /** Give the VM a virtual CD drive (IDE, the pc machine's secondary master). Default true. */
  virtualCd?: boolean;
  /**
   * A file that gets one line per action, in the ipmi_sim lab hook's format (`<ms> power start order=d`,
   * `<ms> power stop`, `<ms> reset start order=c`, `<ms> media insert <file> fetch-ms=<ms> bytes=<n>`,
   * `<ms> media eject`, `<ms> exited <code>`), so the lab's probe counts power cycles of both kinds alike.
   */
  eventLog?: string;
  /** The VM's serial chardev socket (labVmArgs' serial.sock): what the BMC's serial console relays. */
  serialSocket?: string;
}

/** QEMU's boot order letter for a Redfish boot source: the NIC (n), the CD (d), the first disk (c). */
export function bootOrderOf(source: string): string {
  return source === "Pxe" ? "n" : source === "Cd" ? "d" : "c";
}

/**
 * A lab node: QEMU started on power on (with the boot override as its boot order, as the ipmi_sim lab's hook
 * does) and driven through QMP, as sushy-tools drives libvirt: quit, system_powerdown, system_reset,
 * inject-nmi, query-status.
 */
export class QemuMachine implements Machine {
  private child: ChildProcess | undefined;
  private media: string | null = null;

  constructor(private readonly options: QemuMachineOptions) {}

  private record(what: string): void {
    if (this.options.eventLog) appendFileSync(this.options.eventLog, `${Date.now()} ${what}\n`);
  }

  async power(): Promise<MachinePower> {
    if (!this.child || this.child.exitCode !== null || this.child.signalCode !== null) return "Off";
    try {
      const status = (await qmp(this.options.qmpSocket, "query-status")) as { status?: string };
      return status.status === "shutdown" ? "PoweringOff" : "On";
    } catch {
      return "PoweringOn";
    }
  }

  /**
   * A virtual CD: an http(s) image is fetched first (as a BMC does) into the VM's directory; the file then goes
   * into the VM's CD drive at once when it runs (QMP blockdev-change-medium) and at every start. Null ejects.
   */
  async setMedia(image: string | null): Promise<void> {
    const running = (await this.power()) !== "Off";
    if (image === null) {
      this.media = null;
      this.record("media eject");
      if (running)
        await qmp(this.options.qmpSocket, { execute: "eject", arguments: { id: CD_ID, force: true } });
      rmSync(this.isoPath(), { force: true });
      return;
    }
    const fetchStarted = Date.now();
    const file = image.startsWith("/") ? image : await this.fetchImage(image);
    this.media = file;
    const fetchMs = Date.now() - fetchStarted;
    this.record(`media insert ${file} fetch-ms=${fetchMs} bytes=${statSync(file).size}`);
    if (running)
      await qmp(this.options.qmpSocket, {
        execute: "blockdev-change-medium",
        arguments: { id: CD_ID, filename: file, format: "raw", "read-only-mode": "read-only" },
      });
  }

  private isoPath(): string {
    return join(dirname(this.options.qmpSocket), "vmedia.iso");
  }

  private async fetchImage(url: string): Promise<string> {
    const response = await fetch(url, { signal: AbortSignal.timeout(120_000) });
    if (!response.ok || !response.body) throw new Error(`fetching ${url.split("?")[0]}: ${response.status}`);
    const part = `${this.isoPath()}.part`;
    await pipeline(Readable.fromWeb(response.body), createWriteStream(part));
    await rename(part, this.isoPath());
    return this.isoPath();
  }

  async reset(type: MachineReset, bootSource: string): Promise<void> {
    const on = (await this.power()) !== "Off";
    switch (type) {
      case "On":
      case "ForceOn":
        if (!on) await this.start(bootSource, "power");
        return;
      case "ForceOff":
        if (on) {
          this.record("power stop");
          await this.stop();
        }
        return;
      case "GracefulShutdown":
        if (on) this.record("shutdown acpi-powerdown");
        if (on) await qmp(this.options.qmpSocket, "system_powerdown");
        return;
      case "ForceRestart":
      case "GracefulRestart":
        // a new boot order needs a new QEMU: off and on, as the ipmi lab's hook does
        if (on) await this.stop();
        await this.start(bootSource, on ? "reset" : "power");
        return;
      case "Nmi":
        if (on) await qmp(this.options.qmpSocket, "inject-nmi");
        return;
    }
  }

  private async start(bootSource: string, key: "power" | "reset"): Promise<void> {
    this.record(`${key} start order=${bootOrderOf(bootSource)}`);
    rmSync(this.options.qmpSocket, { force: true });
    const argv = [
      ...this.options.argv,
      "-qmp",
      `unix:${this.options.qmpSocket},server=on,wait=off`,
      "-boot",
      `order=${bootOrderOf(bootSource)}`,
    ];
    // a CD drive is always there (an empty one without media) so an insert while running has a device
    if (this.options.virtualCd !== false) {
      argv.push(
        "-drive",
        `if=none,id=${CD_DRIVE},media=cdrom,readonly=on${this.media ? `,format=raw,file=${this.media}` : ""}`,
      );
      argv.push("-device", `ide-cd,drive=${CD_DRIVE},id=${CD_ID},bus=ide.1,unit=0`);
    }
    const child = spawn(this.options.binary ?? "qemu-system-x86_64", argv, { stdio: "ignore" });
    this.child = child;
    child.on("error", () => undefined);
    child.on("exit", (code, signal) => this.record(`exited ${code ?? signal ?? ""}`));
    for (let i = 0; i < 100 && !existsSync(this.options.qmpSocket); i++) await sleep(50);
  }

  private async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    await qmp(this.options.qmpSocket, "quit").catch(() => child.kill("SIGKILL"));
    await Promise.race([exited, sleep(5000).then(() => child.kill("SIGKILL"))]);
  }

  serialPort(): { path: string } | undefined {
    return this.options.serialSocket === undefined ? undefined : { path: this.options.serialSocket };
  }

  async close(): Promise<void> {
    await this.stop();
  }
}
