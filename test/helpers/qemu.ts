import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { exec } from "../../shared/system/exec.ts";
import type { ExecResult } from "../../shared/system/exec.ts";
import { NIC_MODELS, diskDeviceArgs } from "../../scripts/lab/vm-args.ts";
import type { DiskBus, NicModel } from "../../scripts/lab/vm-args.ts";

/** QEMU user-mode (slirp) networking: the guest sees 10.0.2.2 as the host's 127.0.0.1. */
export interface UserNetwork {
  kind: "user";
  mac: string;
  /** The NIC QEMU emulates (default virtio). */
  model?: NicModel;
  /** DHCP boot file, e.g. http://10.0.2.2:PORT/boot/boot.ipxe. */
  bootfile?: string;
  /** slirp's own TFTP root. */
  tftpRoot?: string;
  /**
   * Cut the guest off from the host and the outside: only these forwards reach the host
   * (guest ip:port -> host 127.0.0.1:hostPort, through `busybox nc`).
   */
  restrict?: { forwards: { guestIp: string; guestPort: number; hostPort: number }[] };
}

/** A tap device the caller created (e.g. in a network namespace with dnsmasq). */
export interface TapNetwork {
  kind: "tap";
  mac: string;
  model?: NicModel;
  ifname: string;
}

export interface QemuDisk {
  path: string;
  format: "raw" | "qcow2";
  serial?: string;
  /** virtio (default), nvme, or a SCSI disk behind an emulated HBA (megasas, lsi, mptsas …). */
  bus?: DiskBus;
  /** "unmap": the guest's discards reach the image file (holes punched), as on the lab's drives. */
  discard?: "unmap";
  /** NVMe only: the SMART critical warning bits the drive reports (QEMU's smart_critical_warning), e.g. 0x4. */
  smartCriticalWarning?: number;
}

export interface QemuVmOptions {
  /**
   * "pc" (default): qemu-system-x86_64's PC. "virt": qemu-system-aarch64's arm64 virt machine with the
   * "max" CPU (pointer authentication by QEMU's cheaper own algorithm: TCG spends most of a boot in the
   * architected one), booted by its kernel directly (it has no firmware of its own).
   */
  machine?: "pc" | "virt";
  memoryMb?: number;
  nics: (UserNetwork | TapNetwork)[];
  /** "network": the NIC's iPXE ROM; "disk": the first disk; or a direct kernel boot. */
  boot: "network" | "disk" | { kernel: string; initrd: string; append: string };
  disks?: QemuDisk[];
  /** Serial console (ttyS0) goes to this file; default: a file in a temp dir. */
  serialLog?: string;
  /** Run QEMU inside this network namespace (for tap NICs the caller created there). */
  netns?: string;
  /** Kill QEMU after this long. Default 10 min. */
  timeoutMs?: number;
  extraArgs?: string[];
}

/** The QEMU program for these options' machine. */
export function qemuProgram(options: Pick<QemuVmOptions, "machine">): string {
  return options.machine === "virt" ? "qemu-system-aarch64" : "qemu-system-x86_64";
}

/** The qemu-system-x86_64 (or -aarch64) argv for these options (TCG only: KVM is unusable on these machines). */
export function qemuArgs(options: QemuVmOptions & { serialLog: string }): string[] {
  const machine =
    options.machine === "virt" ? ["-machine", "virt", "-cpu", "max,pauth-impdef=on"] : ["-machine", "pc"];
  const args = ["-accel", "tcg", ...machine, "-m", String(options.memoryMb ?? 512)];
  // -nographic also makes SeaBIOS and iPXE print to the serial port, so the log shows the whole boot.
  args.push("-nographic", "-monitor", "none", "-serial", `file:${options.serialLog}`, "-no-reboot");
  options.nics.forEach((nic, index) => {
    const id = `n${index}`;
    if (nic.kind === "user") {
      const parts = [`user,id=${id}`];
      if (nic.bootfile !== undefined) parts.push(`bootfile=${nic.bootfile}`);
      if (nic.tftpRoot !== undefined) parts.push(`tftp=${nic.tftpRoot}`);
      if (nic.restrict !== undefined) {
        parts.push("restrict=on");
        for (const forward of nic.restrict.forwards) {
          parts.push(
            `guestfwd=tcp:${forward.guestIp}:${forward.guestPort}-cmd:busybox nc 127.0.0.1 ${forward.hostPort}`,
          );
        }
      }
      args.push("-netdev", parts.join(","));
    } else {
      args.push("-netdev", `tap,id=${id},ifname=${nic.ifname},script=no,downscript=no`);
    }
    const device = NIC_MODELS[nic.model ?? "virtio"].device;
    args.push("-device", `${device},netdev=${id},mac=${nic.mac}${index === 0 ? ",bootindex=1" : ""}`);
  });
  (options.disks ?? []).forEach((disk, index) => {
    const discard = disk.discard === undefined ? "" : `,discard=${disk.discard}`;
    args.push("-drive", `if=none,id=d${index},file=${disk.path},format=${disk.format}${discard}`);
    const serial = disk.serial === undefined ? "" : `,serial=${disk.serial}`;
    const bootindex = options.boot === "disk" && index === 0 ? ",bootindex=1" : "";
    const warning =
      disk.smartCriticalWarning === undefined ? "" : `,smart_critical_warning=${disk.smartCriticalWarning}`;
    args.push(...diskDeviceArgs(disk.bus ?? "virtio", index, `${serial}${bootindex}${warning}`));
  });
  if (typeof options.boot === "object") {
    args.push("-kernel", options.boot.kernel, "-initrd", options.boot.initrd, "-append", options.boot.append);
  }
  return [...args, ...(options.extraArgs ?? [])];
}

export interface QemuVm {
  readonly serialLog: string;
  /** Resolves when QEMU exits (guest power off, timeout or stop()). */
  readonly exited: Promise<ExecResult | Error>;
  readSerial(): Promise<string>;
  /**
   * Resolves with the serial output once it matches; rejects if QEMU exits first, time runs out, or
   * failOn matches first (e.g. /No bootable device/: the firmware gave up).
   */
  waitForSerial(pattern: RegExp, options: { timeoutMs: number; failOn?: RegExp }): Promise<string>;
  /** Kills QEMU (if still running) and removes the temp dir. */
  stop(): Promise<void>;
}

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false; // kill(0) would signal our own process group
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Takes one of ANVIL_QEMU_SLOTS (default 1) machine-wide VM slots: a TCG guest keeps a host core busy,
 * and test files run in parallel workers. A slot is a directory (mkdir is atomic) holding the owner's
 * pid; a slot whose owner died is taken over.
 */
async function acquireVmSlot(): Promise<() => Promise<void>> {
  const slots = Math.max(1, Number(process.env.ANVIL_QEMU_SLOTS ?? 1));
  for (;;) {
    for (let slot = 0; slot < slots; slot++) {
      const path = join(tmpdir(), `anvil-qemu-slot-${slot}`);
      try {
        await mkdir(path);
      } catch {
        const owner = Number(await readFile(join(path, "pid"), "utf8").catch(() => "0"));
        const created = (await stat(path).catch(() => null))?.mtimeMs ?? 0;
        // Held, or just being created (no pid yet) unless it has stayed without one for a while.
        if (alive(owner) || (owner === 0 && Date.now() - created < 10_000)) continue;
        await rm(path, { recursive: true, force: true });
        continue;
      }
      await writeFile(join(path, "pid"), String(process.pid));
      return () => rm(path, { recursive: true, force: true });
    }
    await sleep(500);
  }
}

/** Starts one VM, after waiting for a free VM slot (see acquireVmSlot). */
export async function startQemu(options: QemuVmOptions): Promise<QemuVm> {
  const release = await acquireVmSlot();
  const dir = await mkdtemp(join(tmpdir(), "anvil-qemu-"));
  const serialLog = options.serialLog ?? join(dir, "serial.log");
  const controller = new AbortController();
  let done = false;
  const argv = qemuArgs({ ...options, serialLog });
  // `ip netns exec` execs QEMU in place, so killing it kills QEMU.
  const [command, args] =
    options.netns === undefined
      ? [qemuProgram(options), argv]
      : ["ip", ["netns", "exec", options.netns, qemuProgram(options), ...argv]];
  const exited = exec(command, args, {
    signal: controller.signal,
    timeoutMs: options.timeoutMs ?? 600_000,
  })
    .catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))))
    .finally(async () => {
      done = true;
      await release();
    });
  const readSerial = async (): Promise<string> => readFile(serialLog, "utf8").catch(() => "");
  return {
    serialLog,
    exited,
    readSerial,
    async waitForSerial(pattern, { timeoutMs, failOn }) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        // Note whether QEMU had ended before reading, so the final output is always looked at.
        const ended = done;
        const text = await readSerial();
        if (pattern.test(text)) return text;
        if (failOn?.test(text) === true) {
          throw new Error(`${failOn} showed on the serial console before ${pattern}:\n${text.slice(-2000)}`);
        }
        if (ended) {
          const result = await exited;
          const why =
            result instanceof Error ? result.message : `exit ${result.code}: ${result.stderr.trim()}`;
          throw new Error(
            `QEMU ended (${why}) before ${pattern} showed on the serial console:\n${text.slice(-2000)}`,
          );
        }
        if (Date.now() > deadline)
          throw new Error(
            `${pattern} not on the serial console after ${timeoutMs} ms:\n${text.slice(-2000)}`,
          );
        await sleep(200);
      }
    },
    async stop() {
      controller.abort();
      await exited;
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A tiny initramfs (busybox + cpio newc) whose init prints `marker` and the kernel command line on the console,
 * then powers off, so QEMU exits. Returns its path.
 */
export async function buildMarkerInitramfs(dir: string, marker: string): Promise<string> {
  const init = [
    "#!/bin/busybox sh",
    "/bin/busybox mkdir -p /proc /dev",
    "/bin/busybox mount -t devtmpfs dev /dev",
    "/bin/busybox mount -t proc proc /proc",
    "exec >/dev/console 2>&1",
    `echo ${marker}`,
    'echo "CMDLINE: $(/bin/busybox cat /proc/cmdline)"',
    "/bin/busybox poweroff -f",
    "",
  ].join("\n");
  const staging = join(dir, "initramfs");
  await mkdir(join(staging, "bin"), { recursive: true });
  await copyFile("/bin/busybox", join(staging, "bin", "busybox"));
  await chmod(join(staging, "bin", "busybox"), 0o755);
  await writeFile(join(staging, "init"), init, { mode: 0o755 });
  const out = join(dir, "initramfs.cpio");
  const result = await exec("cpio", ["-o", "-H", "newc", "-O", out], {
    cwd: staging,
    input: "init\nbin\nbin/busybox\n",
  });
  if (result.code !== 0) throw new Error(`cpio failed: ${result.stderr}`);
  return out;
}
