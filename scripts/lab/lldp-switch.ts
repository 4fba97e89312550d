import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { exec } from "../../shared/system/exec.ts";
import { alive, spawnDetached, stopPid } from "./daemon.ts";

/** What the lab's LLDP speaker announces, as a top-of-rack switch would: the test checks the node saw it. */
export interface LldpSwitch {
  pid: number;
  socket: string;
  log: string;
  systemName: string;
  /** Each node's tap: the switch port the node's second NIC is cabled to. */
  ports: { tap: string; mac: string; portId: string; description: string }[];
}

async function run(command: string, args: string[]): Promise<string> {
  const result = await exec(command, args, { timeoutMs: 30_000 });
  if (result.code !== 0) throw new Error(`${command} ${args.join(" ")}: ${result.stderr.trim()}`);
  return result.stdout;
}

/**
 * Root only. Creates one tap per node (a node's second NIC attaches to it) and runs lldpd on them, as the
 * switch: chassis id the first tap's MAC, port id "Ethernet1/<n>" (subtype local), system name
 * "lab-switch-<tag>", a frame every second (lldpd's least; a switch's default is 30 s). Its own control
 * socket, so it never meets a system lldpd. @throws Error when lldpd or a tap cannot start
 */
export async function startLldpSwitch(dir: string, nodes: number): Promise<LldpSwitch> {
  if (process.getuid?.() !== 0) throw new Error("the lab's LLDP switch needs root (taps)");
  const tag = randomBytes(3).toString("hex");
  const ports = Array.from({ length: nodes }, (_, i) => ({
    tap: `all${tag}${i + 1}`,
    mac: `02:27:${tag.slice(0, 2)}:${tag.slice(2, 4)}:${tag.slice(4, 6)}:${(i + 1).toString(16).padStart(2, "0")}`,
    portId: `Ethernet1/${i + 1}`,
    description: `lab node ${i + 1}`,
  }));
  const sw: LldpSwitch = {
    pid: 0,
    // Not under the lab's dir: lldpd's privilege-separated half (user _lldpd) must reach its control socket,
    // and a lab under a 0700 directory (mktemp -d, /root) refused it ("Permission denied").
    socket: join(tmpdir(), `anvil-lldpd-${tag}`, "lldpd.sock"),
    log: join(dir, "lldpd.log"),
    systemName: `lab-switch-${tag}`,
    ports,
  };
  try {
    await mkdir(join(sw.socket, ".."), { mode: 0o755 });
    for (const port of ports) {
      await run("ip", ["tuntap", "add", "dev", port.tap, "mode", "tap"]);
      await run("ip", ["link", "set", port.tap, "address", port.mac]);
      // no IPv6 on the link: the host would solicit routers there
      await run("sysctl", ["-qw", `net.ipv6.conf.${port.tap}.disable_ipv6=1`]).catch(() => "");
      await run("ip", ["link", "set", port.tap, "up"]);
    }
    const taps = ports.map((port) => port.tap).join(",");
    sw.pid = spawnDetached("lldpd", ["-d", "-I", taps, "-C", ports[0]!.tap, "-u", sw.socket], {
      log: sw.log,
    });
    for (let i = 0; i < 100 && !existsSync(sw.socket); i++) {
      if (!alive(sw.pid)) throw new Error(`lldpd exited: see ${sw.log}`);
      await sleep(50);
    }
    const cli = (...args: string[]): Promise<string> => run("lldpcli", ["-u", sw.socket, ...args]);
    await cli("configure", "lldp", "tx-interval", "1");
    await cli("configure", "system", "hostname", sw.systemName);
    for (const port of ports) {
      const portArgs = ["lldp", "portidsubtype", "local", port.portId, "description", port.description];
      await cli("configure", "ports", port.tap, ...portArgs);
    }
    return sw;
  } catch (error) {
    await stopLldpSwitch(sw);
    throw error;
  }
}

/** Stops lldpd (by pid) and deletes the taps. */
export async function stopLldpSwitch(sw: Pick<LldpSwitch, "pid" | "ports" | "socket">): Promise<void> {
  if (sw.pid > 0) await stopPid(sw.pid, 3000);
  for (const port of sw.ports) await exec("ip", ["link", "del", port.tap], { timeoutMs: 30_000 });
  await rm(join(sw.socket, ".."), { recursive: true, force: true });
}
