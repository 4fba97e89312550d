import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import {
  freeUdpPort,
  ipmiSimArgs,
  udpBound,
  writeBmcFiles,
  writeLanConf,
} from "../../scripts/lab/bmc-config.ts";

export { freeUdpPort };

export type SimPower = "on" | "off";

export interface IpmiSimOptions {
  username?: string;
  password?: string;
  initialPower?: SimPower;
  initialBootDevice?: string;
  /**
   * A program run after every change the BMC makes, as `HOOK <key> <value>` (key: power, boot, reset,
   * shutdown), with ANVIL_SIM_CHASSIS set to the dir holding the power and boot files; the lab uses it
   * to start and stop QEMU. It must not block: ipmi_sim waits for it.
   */
  hook?: string;
  /** ipmi_sim's SOL device ("tcp:127.0.0.1:PORT": the test's socket plays the serial port). */
  sol?: string;
}

/** A running ipmi_sim: a BMC on a loopback UDP port whose chassis lives in files. */
export interface IpmiSim {
  readonly host: string;
  readonly port: number;
  /** ipmi_sim's pid (benchmarks read its CPU time). */
  readonly pid: number;
  readonly username: string;
  readonly password: string;
  /** Scratch dir: lan.conf, bmc.emu, state/, chassis/{power,boot,events}. */
  readonly dir: string;
  /** driver_info for a node whose BMC this is. */
  driverInfo(): Record<string, string | number>;
  power(): Promise<SimPower>;
  /** Changes the power behind the conductor's back (someone pressed the button). */
  setPower(state: SimPower): Promise<void>;
  /** The boot device ipmi_sim last set ("pxe", "default", ...). */
  bootDevice(): Promise<string>;
  /** Makes the BMC refuse boot device changes (as some do for devices they lack). */
  rejectBootDevice(reject: boolean): Promise<void>;
  /** Every `set` ipmi_sim made through chassis_control, as "key value", oldest first. */
  events(): Promise<string[]>;
  stop(): Promise<void>;
}

async function waitForExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => child.once("exit", () => resolve()));
}

/** Starts ipmi_sim on a free loopback port; resolves once it listens. */
export async function startIpmiSim(options: IpmiSimOptions = {}): Promise<IpmiSim> {
  const username = options.username ?? "admin";
  const password = options.password ?? "s3cret-bmc-pw";
  const dir = await mkdtemp(join(tmpdir(), "anvil-ipmisim-"));
  await writeBmcFiles(dir, { power: options.initialPower, bootDevice: options.initialBootDevice });

  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freeUdpPort();
    await writeLanConf({
      name: "anvil-test-bmc",
      port,
      dir,
      username,
      password,
      hook: options.hook ?? "-",
      sol: options.sol,
    });
    const child = spawn("ipmi_sim", ipmiSimArgs(dir), { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    for (let i = 0; i < 200 && child.exitCode === null; i++) {
      if (await udpBound(port)) return simHandle({ child, port, dir, username, password });
      await sleep(25);
    }
    child.kill("SIGKILL");
    await waitForExit(child);
    if (attempt === 4) {
      await rm(dir, { recursive: true, force: true });
      throw new Error(`ipmi_sim did not start: ${stderr.trim()}`);
    }
  }
  throw new Error("unreachable");
}

function simHandle(parts: {
  child: ChildProcess;
  port: number;
  dir: string;
  username: string;
  password: string;
}): IpmiSim {
  const { child, port, dir, username, password } = parts;
  const chassis = join(dir, "chassis");
  const read = async (name: string): Promise<string> => (await readFile(join(chassis, name), "utf8")).trim();
  return {
    host: "127.0.0.1",
    port,
    pid: child.pid ?? 0,
    username,
    password,
    dir,
    driverInfo: () => ({
      ipmi_address: "127.0.0.1",
      ipmi_port: port,
      ipmi_username: username,
      ipmi_password: password,
    }),
    power: async () => ((await read("power")) === "1" ? "on" : "off"),
    setPower: async (state) => {
      await writeFile(join(chassis, "power.tmp"), state === "on" ? "1\n" : "0\n");
      await rename(join(chassis, "power.tmp"), join(chassis, "power"));
    },
    bootDevice: () => read("boot"),
    rejectBootDevice: async (reject) => {
      if (reject) await writeFile(join(chassis, "reject-boot"), "");
      else await rm(join(chassis, "reject-boot"), { force: true });
    },
    events: async () => (await read("events")).split("\n").filter((line) => line !== ""),
    stop: async () => {
      child.kill("SIGTERM");
      await Promise.race([waitForExit(child), sleep(2000)]);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGKILL");
        await waitForExit(child);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
