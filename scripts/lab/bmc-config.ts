import { createSocket } from "node:dgram";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";

/**
 * ipmi_sim's chassis_control program. ipmi_sim runs it as `PROG CHASSIS_DIR HOOK get power boot` (answers
 * "power:1", "boot:pxe") and `PROG CHASSIS_DIR HOOK set KEY VALUE ...`. Power and boot device live in
 * files; every change is appended to `events` and handed to HOOK (unless "-") as `HOOK KEY VALUE` with
 * ANVIL_SIM_CHASSIS set. A soft power off ("shutdown") records power 0 at once, as an OS that honours ACPI
 * would; a hook that knows better (the lab's, while the VM still runs) writes the truth back.
 */
export const CHASSIS_CONTROL = `#!/bin/sh
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

export interface BmcConfig {
  name: string;
  port: number;
  /** Holds lan.conf, bmc.emu, chassis-control, state/ and chassis/{power,boot,events}. */
  dir: string;
  username: string;
  password: string;
  /** Program run after every chassis change (see CHASSIS_CONTROL), or "-" for none. */
  hook: string;
  /**
   * The serial port Serial-over-LAN reaches: ipmi_sim's `sol` device, e.g. "tcp:127.0.0.1:PORT" (it dials
   * that address and keeps redialling while nothing listens: QEMU's `-serial tcp:…,server` or a test's socket).
   */
  sol?: string;
}

const AUTHS = "none md2 md5 straight";

/** ipmi_sim's lan.conf for one BMC on 127.0.0.1:port with one admin user. */
export function lanConf(config: BmcConfig): string {
  return [
    `name "${config.name}"`,
    `set_working_mc 0x20`,
    `  startlan 1`,
    `    addr 127.0.0.1 ${config.port}`,
    `    priv_limit admin`,
    ...["callback", "user", "operator", "admin"].map((level) => `    allowed_auths_${level} ${AUTHS}`),
    `    guid a123456789abcdefa123456789abcdef`,
    `  endlan`,
    `  chassis_control "${join(config.dir, "chassis-control")} ${join(config.dir, "chassis")} ${config.hook}"`,
    ...(config.sol === undefined ? [] : [`  sol "${config.sol}" 115200`]),
    `  user 2 true "${config.username}" "${config.password}" admin 10 ${AUTHS}`,
    "",
  ].join("\n");
}

/** The emulation file: one BMC with an event log, no sensors. */
export const BMC_EMU = [
  "mc_setbmc 0x20",
  "mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr",
  "sel_enable 0x20 1000 0x0a",
  "mc_enable 0x20",
  "",
].join("\n");

/** Writes everything ipmi_sim needs except lan.conf (written per port attempt by writeLanConf). */
export async function writeBmcFiles(
  dir: string,
  initial: { power?: "on" | "off"; bootDevice?: string } = {},
): Promise<void> {
  const chassis = join(dir, "chassis");
  await mkdir(join(dir, "state"), { recursive: true });
  await mkdir(chassis, { recursive: true });
  await writeFile(join(chassis, "power"), initial.power === "on" ? "1\n" : "0\n");
  await writeFile(join(chassis, "boot"), `${initial.bootDevice ?? "default"}\n`);
  await writeFile(join(chassis, "events"), "");
  await writeFile(join(dir, "chassis-control"), CHASSIS_CONTROL);
  await chmod(join(dir, "chassis-control"), 0o755);
  await writeFile(join(dir, "bmc.emu"), BMC_EMU);
}

export async function writeLanConf(config: BmcConfig): Promise<string> {
  const path = join(config.dir, "lan.conf");
  await writeFile(path, lanConf(config));
  return path;
}

/** ipmi_sim's argv for a BMC whose files are in dir. */
export function ipmiSimArgs(dir: string): string[] {
  return ["-c", join(dir, "lan.conf"), "-f", join(dir, "bmc.emu"), "-s", join(dir, "state"), "-n"];
}

/** A UDP port nobody is bound to on 127.0.0.1 right now (ipmi_sim may still lose a race: callers retry). */
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

/** True when something is bound to 127.0.0.1:port over UDP (how we know ipmi_sim is up). */
export async function udpBound(port: number): Promise<boolean> {
  const wanted = `0100007F:${port.toString(16).toUpperCase().padStart(4, "0")}`;
  const table = await readFile("/proc/net/udp", "utf8");
  return table.split("\n").some((line) => line.trim().split(/\s+/)[1] === wanted);
}
