import bcrypt from "bcryptjs";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { stringify as stringifyYaml } from "yaml";
import { exec } from "../../shared/system/exec.ts";
import { freeUdpPort, ipmiSimArgs, udpBound, writeBmcFiles, writeLanConf } from "./bmc-config.ts";
import { alive, spawnDetached, stopPid } from "./daemon.ts";
import { readLabState, writeLabState, type LabNode, type LabState } from "./state.ts";
import { makeLabCa } from "../../conductor/tls/lab-ca.ts";
import { labAccess, labFetch } from "./access.ts";
import { startLldpSwitch, stopLldpSwitch } from "./lldp-switch.ts";
import {
  GUEST_CONDUCTOR_HTTPS_URL,
  GUEST_CONDUCTOR_IP,
  GUEST_CONDUCTOR_URL,
  labVmArgs,
  type DiskBus,
  type NicModel,
} from "./vm-args.ts";

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const HOOK = join(REPO_ROOT, "scripts/lab/vm-hook.sh");

export interface LabUpOptions {
  /** Where the lab keeps its state (default .tmp/lab). */
  dir: string;
  nodes: number;
  /** Start a conductor (ipmi hardware type, iPXE, the ramdisk); default true. */
  conductor?: boolean;
  /** The conductor's port on 127.0.0.1; 0 picks a free one. Default 6385. */
  port?: number;
  /** Served by the conductor at /images/: must hold ramdisk/anvil.{kernel,initramfs}. Default build/. */
  imageRoot?: string;
  /** More conductor flags (e.g. --fast-track). */
  conductorArgs?: string[];
  memoryMb?: number;
  vcpus?: number;
  /** "raid": every node gets a second virtio disk of the same size (software RAID-1 over the two). */
  shape?: NodeShape;
  /** HTTPS/WSS with a lab CA the ramdisk pins (boot files stay on plain HTTP for iPXE). */
  tls?: boolean;
  /** The API's auth strategy: http_basic with a lab administrator, or noauth (default). */
  auth?: "noauth" | "http_basic";
  /** Every power-on writes the node NIC's frames to vm/nic-<ms>.pcap (QEMU's filter-dump). */
  captureNic?: boolean;
  /** The NIC QEMU emulates for every node (default virtio): the ramdisk's drivers for other hardware. */
  nicModel?: NicModel;
  /** Where the root disk (both RAID members with shape "raid") sits: virtio (default), or behind an HBA. */
  rootBus?: DiskBus;
  /** Root only: every node gets a second NIC on a tap where lldpd announces a switch chassis and port. */
  lldp?: boolean;
}

export type NodeShape = "standard" | "raid";

const hex2 = (n: number): string => n.toString(16).padStart(2, "0");

async function freeTcpPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const address = server.address();
  await new Promise<void>((done) => server.close(() => done()));
  if (address === null || typeof address === "string") throw new Error("no free TCP port");
  return address.port;
}

/** Starts ipmi_sim detached on a free loopback UDP port (retrying lost races); resolves once it listens. */
async function startBmc(node: { name: string; dir: string; username: string; password: string }) {
  const bmcDir = join(node.dir, "bmc");
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freeUdpPort();
    await writeLanConf({
      name: node.name,
      port,
      dir: bmcDir,
      username: node.username,
      password: node.password,
      hook: HOOK,
    });
    await chmod(join(bmcDir, "lan.conf"), 0o600); // it holds the BMC password
    const pid = spawnDetached("ipmi_sim", ipmiSimArgs(bmcDir), { log: join(bmcDir, "ipmi_sim.log") });
    for (let i = 0; i < 200 && alive(pid); i++) {
      if (await udpBound(port)) return { port, pid };
      await sleep(25);
    }
    await stopPid(pid, 500);
  }
  throw new Error(`ipmi_sim for ${node.name} did not start: see ${join(bmcDir, "ipmi_sim.log")}`);
}

async function createNode(options: {
  dir: string;
  index: number;
  conductorPort: number;
  memoryMb: number;
  vcpus: number;
  shape: NodeShape;
  tlsPort?: number;
  captureNic?: boolean;
  nicModel: NicModel;
  rootBus: DiskBus;
  switchPort?: { tap: string; mac: string };
}): Promise<LabNode> {
  const name = `lab-${String(options.index).padStart(2, "0")}`;
  const dir = join(options.dir, name);
  await rm(dir, { recursive: true, force: true });
  await mkdir(join(dir, "vm"), { recursive: true });
  const tag = name.toUpperCase().replace("-", "");
  // The root disk (smallest >= 4 GiB, as IPA picks) is virtio (or behind the HBA rootBus names) and first in
  // PCI order, so SeaBIOS boots it. A "raid" node has two root disks of one size (the members of a RAID-1
  // root) and the NVMe disk.
  const bus = options.rootBus;
  const busTag = bus.toUpperCase().replace(/[^A-Z0-9]/g, "");
  const root = (suffix: string) => ({
    file: join(dir, "vm", `disk-${bus}${suffix}.qcow2`),
    bus,
    serial: `${tag}-${busTag}${suffix}`,
    sizeGb: 5,
  });
  const disks = [
    root(""),
    ...(options.shape === "raid" ? [root("2")] : []),
    { file: join(dir, "vm", "disk-nvme.qcow2"), bus: "nvme" as const, serial: `${tag}-NVME`, sizeGb: 8 },
  ];
  for (const disk of disks) {
    const created = await exec("qemu-img", ["create", "-q", "-f", "qcow2", disk.file, `${disk.sizeGb}G`], {
      timeoutMs: 30_000,
    });
    if (created.code !== 0) throw new Error(`qemu-img create ${disk.file}: ${created.stderr.trim()}`);
  }
  const mac = `52:54:00:a0:00:${hex2(options.index)}`;
  const switchPort =
    options.switchPort === undefined
      ? undefined
      : { tap: options.switchPort.tap, mac: `52:54:00:a1:00:${hex2(options.index)}` };
  const argv = labVmArgs({
    dir: join(dir, "vm"),
    name,
    mac,
    memoryMb: options.memoryMb,
    vcpus: options.vcpus,
    disks,
    conductorPort: options.conductorPort,
    nicModel: options.nicModel,
    ...(options.tlsPort === undefined ? {} : { tlsPort: options.tlsPort }),
    ...(switchPort === undefined ? {} : { switchPort }),
  });
  await writeFile(join(dir, "vm", "qemu.args"), argv.join("\n") + "\n");
  if (options.captureNic) await writeFile(join(dir, "vm", "capture-nic"), "");
  await writeFile(join(dir, "vm", "serial.log"), "");
  await writeFile(join(dir, "vm", "hook.log"), "");
  await writeBmcFiles(join(dir, "bmc"));
  const password = randomBytes(8).toString("hex"); // IPMI 2.0 passwords are at most 20 bytes
  const passwordFile = join(dir, "bmc", "password");
  await writeFile(passwordFile, password, { mode: 0o600 });
  const username = "admin";
  const bmc = await startBmc({ name, dir, username, password });
  return {
    name,
    dir,
    mac,
    bmcPort: bmc.port,
    bmcPid: bmc.pid,
    username,
    passwordFile,
    vcpus: options.vcpus,
    memoryMb: options.memoryMb,
    disks,
    nicModel: options.nicModel,
    switchNicMac: switchPort?.mac ?? null,
  };
}

/** The lab's administrator for http_basic: an htpasswd (bcrypt) and roles file, the password in a 0600 file. */
async function writeLabUsers(dir: string): Promise<NonNullable<LabState["auth"]>> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const username = "lab-admin";
  const password = randomBytes(18).toString("base64url");
  const passwordFile = join(dir, "password");
  await writeFile(passwordFile, password, { mode: 0o600 });
  // cost 12: Python bcrypt's default, so what Ironic's own tooling writes; htpasswd -B writes $2y$
  const digest = `$2y$${(await bcrypt.hash(password, 12)).slice(4)}`;
  const userFile = join(dir, "htpasswd");
  await writeFile(userFile, `${username}:${digest}\n`, { mode: 0o600 });
  await writeFile(join(dir, "roles.yaml"), stringifyYaml({ users: { [username]: { role: "admin" } } }));
  return { userFile, username, passwordFile };
}

/** The conductor flags for the lab's TLS and auth (none for a plain lab). */
function secureArgs(state: LabState): string[] {
  const args: string[] = [];
  if (state.tls) {
    args.push(
      ...["--tls-cert", state.tls.cert, "--tls-key", state.tls.key, "--tls-ca", state.tls.caCert],
      // the agent fetches the test images from the conductor's https /images/: it trusts the lab CA for them
      ...["--tls-image-ca", state.tls.caCert],
      ...["--boot-http-listen", `127.0.0.1:${state.bootPort}`],
    );
  }
  if (state.auth)
    args.push(...["--auth-strategy", "http_basic", "--http-basic-auth-user-file", state.auth.userFile]);
  return args;
}

/** Starts (or restarts) the lab's conductor and records it in the state; resolves once its API answers. */
export async function startLabConductor(state: LabState, extraArgs: string[] = []): Promise<LabState> {
  const port = state.conductorPort;
  const log = join(state.dir, "conductor.log");
  const args = [
    ...["--import", "tsx", "conductor/main.ts", "--host", "127.0.0.1", "--port", String(port)],
    ...["--data-dir", join(state.dir, "conductor")],
    // what the ramdisk dials (wss:// with TLS) and temporary image URLs start with
    ...["--public-url", state.tls ? GUEST_CONDUCTOR_HTTPS_URL : GUEST_CONDUCTOR_URL],
    ...["--deploy-kernel", state.deployKernel, "--deploy-ramdisk", state.deployRamdisk],
    ...["--image-root", state.imageRoot],
    // the deploy kernel and ramdisk iPXE fetches by a fixed URL; every other image only by a signed link
    ...["--images-public-dir", "ramdisk"],
    // Test images power themselves off after printing their marker; a power sync forcing the recorded
    // state would switch them on again and again.
    ...["--power-sync-interval", "0"],
    ...state.conductorArgs,
    ...extraArgs,
  ];
  const pid = spawnDetached(process.execPath, [...args, ...secureArgs(state)], { log, cwd: REPO_ROOT });
  const url = `${state.tls ? "https" : "http"}://127.0.0.1:${port}`;
  const guestUrl = state.tls ? GUEST_CONDUCTOR_HTTPS_URL : GUEST_CONDUCTOR_URL;
  const fetch = labFetch(labAccess(state));
  const deadline = Date.now() + 60_000;
  for (;;) {
    const up = await fetch(`${url}/v1/nodes?limit=1`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (!alive(pid)) throw new Error(`the conductor exited: see ${log}`);
    if (Date.now() > deadline) throw new Error(`the conductor did not answer within 60 s: see ${log}`);
    await sleep(200);
  }
  const next = { ...state, conductor: { pid, port, url, guestUrl, log } };
  await writeLabState(next);
  return next;
}

export async function stopLabConductor(
  state: LabState,
  signal: "SIGTERM" | "SIGKILL" = "SIGTERM",
): Promise<LabState> {
  if (state.conductor !== null) {
    if (signal === "SIGKILL" && alive(state.conductor.pid)) process.kill(state.conductor.pid, "SIGKILL");
    await stopPid(state.conductor.pid, 10_000);
  }
  return state;
}

/** Starts N nodes (ipmi_sim BMC + QEMU on power on) and, unless told not to, a conductor. */
export async function labUp(options: LabUpOptions): Promise<LabState> {
  const dir = resolve(options.dir);
  const previous = await readLabState(dir).catch(() => null);
  if (
    previous &&
    (previous.nodes.some((n) => alive(n.bmcPid)) || (previous.conductor && alive(previous.conductor.pid)))
  ) {
    throw new Error(`a lab is already up in ${dir}: run \`npm run lab -- down --dir ${options.dir}\` first`);
  }
  // The node number is the MAC's last octet and a two-digit name.
  if (!Number.isInteger(options.nodes) || options.nodes < 1 || options.nodes > 99) {
    throw new Error(`the lab has 1 to 99 nodes, not ${options.nodes}`);
  }
  const imageRoot = resolve(options.imageRoot ?? join(REPO_ROOT, "build"));
  for (const file of ["ramdisk/anvil.kernel", "ramdisk/anvil.initramfs"]) {
    if (!existsSync(join(imageRoot, file)))
      throw new Error(`${join(imageRoot, file)} is missing: run \`npm run build:ramdisk\``);
  }
  await mkdir(dir, { recursive: true });
  // A fresh lab: the previous conductor's database names nodes that no longer exist.
  await rm(join(dir, "conductor"), { recursive: true, force: true });
  await rm(join(dir, "conductor.log"), { force: true });
  const port = options.port === undefined ? 6385 : options.port === 0 ? await freeTcpPort() : options.port;
  await rm(join(dir, "tls"), { recursive: true, force: true });
  await rm(join(dir, "auth"), { recursive: true, force: true });
  const tls = options.tls
    ? await makeLabCa({ dir: join(dir, "tls"), names: [GUEST_CONDUCTOR_IP, "127.0.0.1", "localhost"] })
    : null;
  const bootPort = tls ? await freeTcpPort() : null;
  let state: LabState = {
    tls: tls && { caCert: tls.caCert, cert: tls.cert, key: tls.key, caFingerprint: tls.caFingerprint },
    auth: options.auth === "http_basic" ? await writeLabUsers(join(dir, "auth")) : null,
    bootPort,
    dir,
    imageRoot,
    conductorArgs: options.conductorArgs ?? [],
    conductor: null,
    deployKernel: `${GUEST_CONDUCTOR_URL}/images/ramdisk/anvil.kernel`,
    deployRamdisk: `${GUEST_CONDUCTOR_URL}/images/ramdisk/anvil.initramfs`,
    conductorPort: port,
    nodes: [],
    lldp: null,
  };
  await writeLabState(state);
  try {
    if (options.lldp === true) {
      state = { ...state, lldp: await startLldpSwitch(dir, options.nodes) };
      await writeLabState(state);
    }
    for (let index = 1; index <= options.nodes; index++) {
      const node = await createNode({
        dir,
        index,
        conductorPort: port,
        memoryMb: options.memoryMb ?? 768,
        vcpus: options.vcpus ?? 1,
        shape: options.shape ?? "standard",
        captureNic: options.captureNic === true,
        nicModel: options.nicModel ?? "virtio",
        rootBus: options.rootBus ?? "virtio",
        ...(state.lldp === null ? {} : { switchPort: state.lldp.ports[index - 1]! }),
        // with TLS the guest's port 80 reaches the boot files' plain listener and 443 the API
        ...(bootPort === null ? {} : { conductorPort: bootPort, tlsPort: port }),
      });
      state = { ...state, nodes: [...state.nodes, node] };
      await writeLabState(state);
    }
    if (options.conductor !== false) state = await startLabConductor(state);
  } catch (error) {
    await labDown(dir);
    throw error;
  }
  return state;
}

/**
 * Powers off every VM and stops every process the lab started, by pid. Keeps the logs; deletes the VMs'
 * disk images, which labUp makes anew and which grow to gigabytes once a node is deployed and erased.
 */
export async function labDown(dirOption: string): Promise<LabState | null> {
  const dir = resolve(dirOption);
  const state = await readLabState(dir);
  if (state === null) return null;
  if (state.conductor) await stopPid(state.conductor.pid, 10_000);
  for (const node of state.nodes) {
    await stopPid(node.bmcPid, 2000);
    for (const file of ["qemu.pid", "supervisor.pid"]) {
      const pid = Number(await readFile(join(node.dir, "vm", file), "utf8").catch(() => "0"));
      await stopPid(pid, 3000);
    }
    for (const disk of node.disks) await rm(disk.file, { force: true });
  }
  if (state.lldp) await stopLldpSwitch(state.lldp);
  return state;
}
