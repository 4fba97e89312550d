import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { createSocket } from "node:dgram";
import { chmod, mkdir, mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

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

// ipmi_sim runs `PROG DIR get power boot` (answers "power:1", "boot:pxe") and `PROG DIR set KEY VALUE ...`.
// A soft power off ("shutdown") switches off at once, as an OS that honours ACPI would.
const CHASSIS_CONTROL = `#!/bin/sh
dir=$1; hook=$2; shift 2
op=$1; shift
if [ "$op" = get ]; then
  for key in "$@"; do
    case "$key" in
      power) echo "power:$(cat "$dir/power")" ;;
      boot) echo "boot:$(cat "$dir/boot")" ;;
    esac
  done
  exit 0
fi
while [ $# -ge 2 ]; do
  key=$1; value=$2; shift 2
  if [ -e "$dir/reject-$key" ]; then exit 1; fi
  echo "$key $value" >> "$dir/events"
  case "$key" in
    power) echo "$value" > "$dir/power.tmp" && mv "$dir/power.tmp" "$dir/power" ;;
    boot) echo "$value" > "$dir/boot.tmp" && mv "$dir/boot.tmp" "$dir/boot" ;;
    shutdown) [ "$value" = 1 ] && echo 0 > "$dir/power.tmp" && mv "$dir/power.tmp" "$dir/power" ;;
  esac
  if [ "$hook" != - ]; then ANVIL_SIM_CHASSIS="$dir" "$hook" "$key" "$value"; fi
done
exit 0
`;

function lanConf(options: {
  port: number;
  dir: string;
  username: string;
  password: string;
  hook: string;
}): string {
  const auths = "none md2 md5 straight";
  return [
    `name "anvil-test-bmc"`,
    `set_working_mc 0x20`,
    `  startlan 1`,
    `    addr 127.0.0.1 ${options.port}`,
    `    priv_limit admin`,
    ...["callback", "user", "operator", "admin"].map((level) => `    allowed_auths_${level} ${auths}`),
    `    guid a123456789abcdefa123456789abcdef`,
    `  endlan`,
    `  chassis_control "${join(options.dir, "chassis-control")} ${join(options.dir, "chassis")} ${options.hook}"`,
    `  user 2 true "${options.username}" "${options.password}" admin 10 ${auths}`,
    "",
  ].join("\n");
}

const EMU = [
  "mc_setbmc 0x20",
  "mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr",
  "sel_enable 0x20 1000 0x0a",
  "mc_enable 0x20",
  "",
].join("\n");

/** A UDP port nobody is bound to on 127.0.0.1 right now (ipmi_sim may still lose a race: we retry). */
export async function freeUdpPort(): Promise<number> {
  const socket = createSocket("udp4");
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.bind(0, "127.0.0.1", resolve);
  });
  const { port } = socket.address();
  await new Promise<void>((resolve) => socket.close(resolve));
  return port;
}

async function udpBound(port: number): Promise<boolean> {
  const wanted = `0100007F:${port.toString(16).toUpperCase().padStart(4, "0")}`;
  const table = await readFile("/proc/net/udp", "utf8");
  return table.split("\n").some((line) => line.trim().split(/\s+/)[1] === wanted);
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
  const chassis = join(dir, "chassis");
  await mkdir(join(dir, "state"));
  await mkdir(chassis);
  await writeFile(join(chassis, "power"), options.initialPower === "on" ? "1\n" : "0\n");
  await writeFile(join(chassis, "boot"), `${options.initialBootDevice ?? "default"}\n`);
  await writeFile(join(chassis, "events"), "");
  await writeFile(join(dir, "chassis-control"), CHASSIS_CONTROL);
  await chmod(join(dir, "chassis-control"), 0o755);
  await writeFile(join(dir, "bmc.emu"), EMU);

  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freeUdpPort();
    await writeFile(
      join(dir, "lan.conf"),
      lanConf({ port, dir, username, password, hook: options.hook ?? "-" }),
    );
    const child = spawn(
      "ipmi_sim",
      ["-c", join(dir, "lan.conf"), "-f", join(dir, "bmc.emu"), "-s", join(dir, "state"), "-n"],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
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
