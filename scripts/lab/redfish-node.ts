// The lab's Redfish mode: one or several QEMU nodes driven by the lab Redfish BMC (QMP, no ipmi_sim), their
// taps on one bridge with no DHCP server (so the nodes reach each other and the conductor), each booting its
// deploy ramdisk from the conductor's virtual-media ISO with a static address from its network_data. Kept
// apart from lab.ts (the ipmi lab): its own state file, its own up and down.
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { exec } from "../../shared/system/exec.ts";
import { alive, spawnDetached, stopPid } from "./daemon.ts";
import { REPO_ROOT } from "./lab.ts";
import { labVmArgs, type NicModel } from "./vm-args.ts";

const RedfishLabNode = z.object({
  name: z.string(),
  dir: z.string(),
  mac: z.string(),
  /** The node's tap on the lab's bridge. */
  tap: z.string(),
  /** The node's static address (network_data), in hostIp's subnet: .10, .11, … in node order. */
  ip: z.string(),
  systemId: z.string(),
  networkDataFile: z.string(),
  memoryMb: z.number().int(),
  vcpus: z.number().int(),
  disks: z.array(z.object({ file: z.string(), serial: z.string(), sizeGb: z.number() })),
});
export type RedfishLabNode = z.infer<typeof RedfishLabNode>;

export const RedfishLabState = z.object({
  dir: z.string(),
  /** The bridge every node's tap is on (no DHCP server anywhere on it) and the host's address on it. */
  bridge: z.string(),
  hostIp: z.string(),
  prefix: z.number().int(),
  /** The tshark capture of the bridge for the lab's life (pcapng), and its pid. */
  capture: z.object({ file: z.string(), pid: z.number().int() }),
  conductor: z.object({ pid: z.number().int(), url: z.string(), log: z.string() }).nullable(),
  conductorPort: z.number().int(),
  imageRoot: z.string(),
  bmc: z.object({
    pid: z.number().int(),
    url: z.string(),
    username: z.string(),
    /** 0600; never printed, never in argv (the BMC reads it from its environment). */
    passwordFile: z.string(),
    log: z.string(),
  }),
  /** The first node (the one a single-node lab has). */
  node: RedfishLabNode,
  /** Every node, in order (lab-01, lab-02, …), all on the bridge, all systems of the one BMC. */
  nodes: z.array(RedfishLabNode).min(1),
});
export type RedfishLabState = z.infer<typeof RedfishLabState>;

const stateFile = (dir: string): string => join(dir, "redfish-lab.json");

export async function readRedfishLabState(dir: string): Promise<RedfishLabState | null> {
  const text = await readFile(stateFile(resolve(dir)), "utf8").catch(() => null);
  return text === null ? null : RedfishLabState.parse(JSON.parse(text));
}

async function writeState(state: RedfishLabState): Promise<void> {
  const path = stateFile(state.dir);
  await writeFile(`${path}.tmp`, JSON.stringify(state, null, 2) + "\n");
  await rename(`${path}.tmp`, path);
}

/**
 * OpenStack's network_data.json for one NIC with a static IPv4 address and no gateway (the conductor is on
 * the same link): what the node's `network_data` field carries and the ISO hands the ramdisk. Pure.
 */
export function staticNetworkData(options: { mac: string; ip: string; prefix: number }): {
  links: Record<string, unknown>[];
  networks: Record<string, unknown>[];
  services: unknown[];
} {
  if (!/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/.test(options.mac)) throw new Error(`bad MAC ${options.mac}`);
  if (!Number.isInteger(options.prefix) || options.prefix < 8 || options.prefix > 30)
    throw new Error(`bad prefix ${options.prefix}`);
  const mask = (0xffffffff << (32 - options.prefix)) >>> 0;
  const netmask = [24, 16, 8, 0].map((shift) => (mask >>> shift) & 0xff).join(".");
  return {
    links: [{ id: "lab-nic0", type: "phy", ethernet_mac_address: options.mac, mtu: 1500 }],
    networks: [
      {
        id: "lab-net0",
        link: "lab-nic0",
        type: "ipv4",
        ip_address: options.ip,
        netmask,
        routes: [],
        network_id: "lab-no-dhcp",
      },
    ],
    services: [],
  };
}

/** The lab VM argv with its slirp NIC replaced by the tap on the bridge (no slirp, so no slirp DHCP). Pure. */
export function withTapNic(argv: readonly string[], tap: string): string[] {
  const at = argv.findIndex((arg, index) => argv[index - 1] === "-netdev" && arg.startsWith("user,"));
  if (at < 0) throw new Error("the argv has no user-mode -netdev");
  const id = /(?:^|,)id=([^,]+)/.exec(argv[at] ?? "")?.[1] ?? "n0";
  const next = [...argv];
  next[at] = `tap,id=${id},ifname=${tap},script=no,downscript=no`;
  return next;
}

/** A /24 in 10.213.0.0/16 that no address of this host is in (the bridge gets .1, the nodes .10, .11, …). */
export function pickSubnet(inUse: readonly string[], random: () => number = Math.random): string {
  const taken = new Set(
    inUse.flatMap((cidr) => {
      const m = /^10\.213\.(\d+)\./.exec(cidr);
      return m ? [Number(m[1])] : [];
    }),
  );
  const free = Array.from({ length: 254 }, (_, i) => i + 1).filter((n) => !taken.has(n));
  const third = free[Math.floor(random() * free.length)];
  if (third === undefined) throw new Error("no free /24 in 10.213.0.0/16");
  return `10.213.${third}`;
}

async function run(command: string, args: string[]): Promise<string> {
  const result = await exec(command, args, { timeoutMs: 30_000 });
  if (result.code !== 0) throw new Error(`${command} ${args.join(" ")}: ${result.stderr.trim()}`);
  return result.stdout;
}

async function freePort(host: string): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, host, done));
  const address = server.address();
  await new Promise<void>((done) => server.close(() => done()));
  if (address === null || typeof address === "string") throw new Error("no free TCP port");
  return address.port;
}

async function waitFor(what: string, check: () => Promise<boolean>, daemon: { pid: number; log: string }) {
  const { pid, log } = daemon;
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (!alive(pid)) throw new Error(`${what} exited: see ${log}`);
    if (Date.now() > deadline) throw new Error(`${what} did not answer within 60 s: see ${log}`);
    await sleep(200);
  }
}

/** Most nodes one lab's bridge takes (their addresses are .10 up; a 2-core host runs two at a time well). */
export const REDFISH_LAB_MAX_NODES = 8;

/** Node `index`'s (0-based) name, MAC, tap and address in a lab whose bridge tag is `tag`. Pure. */
export function labNodeIdentity(
  tag: string,
  index: number,
  subnet: string,
): { name: string; mac: string; tap: string; ip: string } {
  if (!/^[0-9a-f]{6}$/.test(tag)) throw new Error(`bad lab tag ${tag}`);
  if (!Number.isInteger(index) || index < 0 || index >= REDFISH_LAB_MAX_NODES)
    throw new Error(`bad node index ${index}`);
  return {
    name: `lab-${String(index + 1).padStart(2, "0")}`,
    // the tag's bytes keep two labs' MACs apart; the index keeps this lab's nodes apart
    mac: `52:54:00:b${index.toString(16)}:${tag.slice(0, 2)}:${tag.slice(2, 4)}`,
    tap: `avm${tag}t${index}`,
    ip: `${subnet}.${10 + index}`,
  };
}

export interface RedfishLabOptions {
  dir: string;
  /** How many nodes (default 1), all on the one bridge, all systems of the one BMC. */
  nodes?: number;
  /** Served by the conductor at /images/ (ramdisk/, test-images/). Default build/. */
  imageRoot?: string;
  memoryMb?: number;
  /** Start a conductor on the bridge's address (default true). */
  conductor?: boolean;
  /** More conductor flags (e.g. --deploy-swarm), after the lab's own. */
  conductorArgs?: readonly string[];
  /** The NIC QEMU emulates on each node's tap (default virtio). */
  nicModel?: NicModel;
}

/** One node's disks, QEMU argv (its tap as NIC, IDE CD), System description and network_data. */
async function prepareNode(
  dir: string,
  identity: { name: string; mac: string; tap: string; ip: string },
  settings: { prefix: number; memoryMb: number; nicModel?: NicModel },
): Promise<RedfishLabNode> {
  const { name, mac, tap, ip } = identity;
  const nodeDir = join(dir, name);
  const vmDir = join(nodeDir, "vm");
  await mkdir(vmDir, { recursive: true });
  await run("ip", ["tuntap", "add", "dev", tap, "mode", "tap"]);
  const serialBase = name.replace(/-/g, "").toUpperCase(); // lab-01 → LAB01, as the single-node lab had
  const disks = [
    {
      file: join(vmDir, "disk-virtio.qcow2"),
      bus: "virtio" as const,
      serial: `${serialBase}-VIRTIO`,
      sizeGb: 5,
    },
  ];
  for (const disk of disks)
    await run("qemu-img", ["create", "-q", "-f", "qcow2", disk.file, `${disk.sizeGb}G`]);
  const { memoryMb, nicModel } = settings;
  const vcpus = 1;
  const vm = { dir: vmDir, name, mac, memoryMb, vcpus, disks, conductorPort: 1, nicModel };
  const argv = [...withTapNic(labVmArgs(vm), tap), ...["-pidfile", join(vmDir, "qemu.pid")]];
  await writeFile(join(vmDir, "qemu.args"), argv.join("\n") + "\n");
  await writeFile(join(vmDir, "serial.log"), "");
  await writeFile(join(vmDir, "hook.log"), "");
  await writeFile(
    join(vmDir, "system.json"),
    JSON.stringify({
      cpus: vcpus,
      memoryMiB: memoryMb,
      macs: [mac],
      disks: disks.map((d) => ({ id: d.serial, bytes: d.sizeGb * 1024 ** 3, mediaType: "HDD" })),
    }),
  );
  const networkDataFile = join(nodeDir, "network_data.json");
  await writeFile(
    networkDataFile,
    JSON.stringify(staticNetworkData({ mac, ip, prefix: settings.prefix }), null, 2) + "\n",
  );
  return {
    name,
    dir: nodeDir,
    mac,
    tap,
    ip,
    systemId: `/redfish/v1/Systems/${name}`,
    networkDataFile,
    memoryMb,
    vcpus,
    disks: disks.map(({ file, serial, sizeGb }) => ({ file, serial, sizeGb })),
  };
}

/**
 * Root only (a bridge and taps). Creates a bridge with no DHCP server and a capture on it; for each node its
 * tap on the bridge, disks and QEMU argv (tap NIC, IDE CD); the lab Redfish BMC on 127.0.0.1 driving every
 * node through QMP (one System each); and a conductor listening on the bridge's address (what the BMC fetches
 * the ISO from and the ramdisks dial). The nodes share the bridge, so they reach each other too.
 */
export async function redfishLabUp(options: RedfishLabOptions): Promise<RedfishLabState> {
  const dir = resolve(options.dir);
  const count = options.nodes ?? 1;
  if (!Number.isInteger(count) || count < 1 || count > REDFISH_LAB_MAX_NODES)
    throw new Error(`a Redfish lab has 1 to ${REDFISH_LAB_MAX_NODES} nodes, not ${count}`);
  const previous = await readRedfishLabState(dir).catch(() => null);
  if (previous && (alive(previous.bmc.pid) || (previous.conductor && alive(previous.conductor.pid))))
    throw new Error(`a Redfish lab is already up in ${dir}: take it down first`);
  if (process.getuid?.() !== 0) throw new Error("the Redfish lab needs root (a bridge and a tap)");
  const imageRoot = resolve(options.imageRoot ?? join(REPO_ROOT, "build"));
  for (const file of ["ramdisk/anvil.kernel", "ramdisk/anvil.initramfs"])
    if (!existsSync(join(imageRoot, file)))
      throw new Error(`${join(imageRoot, file)} is missing: run \`npm run build:ramdisk\``);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });

  const tag = randomBytes(3).toString("hex");
  const bridge = `avm${tag}`;
  const addresses = (await run("ip", ["-4", "-o", "addr", "show"]))
    .split("\n")
    .flatMap((line) => line.trim().split(/\s+/)[3] ?? []);
  const subnet = pickSubnet(addresses);
  const hostIp = `${subnet}.1`;
  const prefix = 24;
  const identities = Array.from({ length: count }, (_, i) => labNodeIdentity(tag, i, subnet));
  // for a down after a failed up: the bridge, and every tap that may have been made
  const partial = { dir, bridge, taps: identities.map((n) => n.tap) };
  await writeFile(stateFile(dir), JSON.stringify(partial) + "\n");
  try {
    await run("ip", ["link", "add", bridge, "type", "bridge"]);
    await run("ip", ["addr", "add", `${hostIp}/${prefix}`, "dev", bridge]);
    // no IPv6 on the lab link: the host would otherwise solicit routers and announce itself there
    await run("sysctl", ["-qw", `net.ipv6.conf.${bridge}.disable_ipv6=1`]).catch(() => "");
    const memoryMb = options.memoryMb ?? 768;
    const nodes: RedfishLabNode[] = [];
    for (const identity of identities)
      nodes.push(await prepareNode(dir, identity, { prefix, memoryMb, nicModel: options.nicModel }));
    for (const node of nodes) {
      await run("ip", ["link", "set", node.tap, "master", bridge]);
      await run("ip", ["link", "set", node.tap, "up"]);
    }
    await run("ip", ["link", "set", bridge, "up"]);

    // the capture: every frame on the bridge (headers only), to show what the nodes did and did not send
    const captureFile = join(dir, "bridge.pcapng");
    const capturePid = spawnDetached("dumpcap", ["-q", "-i", bridge, "-s", "256", "-w", captureFile], {
      log: join(dir, "dumpcap.log"),
    });

    // the BMC on loopback, one System per node; its password through the environment, never argv
    const username = "admin";
    const password = randomBytes(12).toString("base64url");
    const passwordFile = join(dir, "bmc-password");
    await writeFile(passwordFile, password, { mode: 0o600 });
    const bmcPort = await freePort("127.0.0.1");
    const bmcLog = join(dir, "bmc.log");
    const bmcPid = spawnDetached(
      process.execPath,
      [
        ...["--import", "tsx", "scripts/lab/redfish/main.ts", "--port", String(bmcPort)],
        ...nodes.flatMap((node) => ["--qemu", `${node.name}=${join(node.dir, "vm")}`]),
      ],
      {
        log: bmcLog,
        cwd: REPO_ROOT,
        env: { ANVIL_REDFISH_USERNAME: username, ANVIL_REDFISH_PASSWORD: password },
      },
    );
    const bmcUrl = `http://127.0.0.1:${bmcPort}`;
    await waitFor(
      "the lab Redfish BMC",
      () =>
        fetch(`${bmcUrl}/redfish/v1`).then(
          (r) => r.ok,
          () => false,
        ),
      { pid: bmcPid, log: bmcLog },
    );

    const conductorPort = await freePort(hostIp);
    let state: RedfishLabState = {
      dir,
      bridge,
      hostIp,
      prefix,
      capture: { file: captureFile, pid: capturePid },
      conductor: null,
      conductorPort,
      imageRoot,
      bmc: { pid: bmcPid, url: bmcUrl, username, passwordFile, log: bmcLog },
      node: nodes[0]!,
      nodes,
    };
    await writeState(state);
    if (options.conductor !== false) state = await startRedfishLabConductor(state, options.conductorArgs);
    return state;
  } catch (error) {
    await redfishLabDown(dir);
    throw error;
  }
}

/** Starts the lab's conductor on the bridge's address; resolves once its API answers. */
export async function startRedfishLabConductor(
  state: RedfishLabState,
  extraArgs: readonly string[] = [],
): Promise<RedfishLabState> {
  const log = join(state.dir, "conductor.log");
  const url = `http://${state.hostIp}:${state.conductorPort}`;
  const pid = spawnDetached(
    process.execPath,
    [
      ...["--import", "tsx", "conductor/main.ts"],
      ...["--host", state.hostIp, "--port", String(state.conductorPort)],
      // a non-loopback address wants an explicit strategy: the bridge is this host's own, with one VM on it
      ...["--auth-strategy", "noauth"],
      ...["--data-dir", join(state.dir, "conductor")],
      // the BMC (on the host) and the ramdisk (on the bridge) both reach the conductor at this address
      ...["--public-url", url],
      ...["--image-root", state.imageRoot],
      // the ISO's kernel and initramfs, used in place (a file:// source is never downloaded)
      ...["--deploy-kernel", `file://${join(state.imageRoot, "ramdisk", "anvil.kernel")}`],
      ...["--deploy-ramdisk", `file://${join(state.imageRoot, "ramdisk", "anvil.initramfs")}`],
      // the test image powers itself off after its marker; a power sync would switch it on again
      ...["--power-sync-interval", "0"],
      ...extraArgs,
    ],
    { log, cwd: REPO_ROOT },
  );
  await waitFor(
    "the conductor",
    () =>
      fetch(`${url}/v1/nodes?limit=1`).then(
        (r) => r.ok,
        () => false,
      ),
    { pid, log },
  );
  const next = { ...state, conductor: { pid, url, log } };
  await writeState(next);
  return next;
}

/** Stops what the Redfish lab started (by pid), deletes the bridge, the taps and the disks; logs stay. */
export async function redfishLabDown(dirOption: string): Promise<void> {
  const dir = resolve(dirOption);
  const text = await readFile(stateFile(dir), "utf8").catch(() => null);
  if (text === null) return;
  const state = JSON.parse(text) as Partial<RedfishLabState> & { taps?: string[] };
  if (state.conductor) await stopPid(state.conductor.pid, 10_000);
  if (state.bmc) await stopPid(state.bmc.pid, 8000); // it quits its QEMUs
  const nodes = state.nodes ?? (state.node ? [state.node] : []);
  for (const node of nodes) {
    const pid = Number(await readFile(join(node.dir, "vm", "qemu.pid"), "utf8").catch(() => "0"));
    await stopPid(pid, 3000);
    for (const disk of node.disks) await rm(disk.file, { force: true });
    await rm(join(node.dir, "vm", "vmedia.iso"), { force: true });
  }
  if (state.capture) await stopPid(state.capture.pid, 5000);
  const taps = new Set([...(state.taps ?? []), ...nodes.map((node) => node.tap)]);
  for (const link of [...taps, state.bridge])
    if (link) await exec("ip", ["link", "del", link], { timeoutMs: 30_000 });
}
