import { join } from "node:path";
import { exec } from "../../shared/system/exec.ts";
import type { CommandName } from "../../shared/protocol.ts";
import { ensureAgentBuilt, ROOT } from "./agent.ts";
import { FakeConductor } from "./fake-conductor.ts";
import { startQemu } from "./qemu.ts";
import type { QemuDisk, QemuVm } from "./qemu.ts";

const MAC = "52:54:00:4a:4e:0d";

/** Builds the agent (if stale) and the deploy ramdisk into `dir`. */
export async function buildRamdisk(dir: string): Promise<{ kernel: string; initrd: string }> {
  const agent = await ensureAgentBuilt();
  const build = await exec("bash", ["images/ramdisk/build.sh", "--agent", agent, "--out", dir], {
    cwd: ROOT,
    timeoutMs: 900_000,
  });
  if (build.code !== 0) throw new Error(`ramdisk build failed: ${build.stderr}`);
  return { kernel: join(dir, "anvil.kernel"), initrd: join(dir, "anvil.initramfs") };
}

export interface RamdiskVm {
  vm: QemuVm;
  conductor: FakeConductor;
  /** Runs one agent command; resolves with its value, rejects with the agent's error code and message. */
  call(name: CommandName, args: unknown, timeoutMs?: number): Promise<unknown>;
  /** Like call, but resolves with the error instead of the value. */
  callFailing(
    name: CommandName,
    args: unknown,
    timeoutMs?: number,
  ): Promise<{ code: string; message: string }>;
  stop(): Promise<void>;
}

/**
 * Boots the deploy ramdisk in QEMU (TCG) with these disks attached and the real agent connected to a fake
 * conductor, so a test drives the agent executable command by command inside a Linux with md, then checks
 * the disk files from the host once it stops.
 */
export async function bootRamdisk(options: {
  ramdisk: { kernel: string; initrd: string };
  disks: QemuDisk[];
  /** More kernel arguments (e.g. rdinit= for a benchmark's own init in front of the ramdisk's). */
  append?: string;
  /** Serial console (ttyS0) goes to this file. */
  serialLog?: string;
  /** Kill QEMU after this long (default: startQemu's). */
  timeoutMs?: number;
  /** vCPUs (QEMU -smp); default 1. */
  cpus?: number;
}): Promise<RamdiskVm> {
  const conductor = await FakeConductor.start();
  const vm = await startQemu({
    memoryMb: 768,
    nics: [{ kind: "user", mac: MAC }],
    disks: options.disks,
    ...(options.serialLog === undefined ? {} : { serialLog: options.serialLog }),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    ...(options.cpus === undefined ? {} : { extraArgs: ["-smp", String(options.cpus)] }),
    boot: {
      kernel: options.ramdisk.kernel,
      initrd: options.ramdisk.initrd,
      append: `console=ttyS0 anvil.conductor=ws://10.0.2.2:${conductor.port}/v1/agent BOOTIF=01-${MAC.replaceAll(":", "-")}${options.append === undefined ? "" : ` ${options.append}`}`,
    },
  });
  const call = async (name: CommandName, args: unknown, timeoutMs = 300_000): Promise<unknown> => {
    const result = await conductor.call(name, args, timeoutMs);
    if (!result.ok) throw new Error(`${name}: ${result.error.code}: ${result.error.message}`);
    return result.value;
  };
  return {
    vm,
    conductor,
    call,
    async callFailing(name, args, timeoutMs = 300_000) {
      const result = await conductor.call(name, args, timeoutMs);
      if (result.ok)
        throw new Error(`${name} succeeded but was expected to fail: ${JSON.stringify(result.value)}`);
      return { code: result.error.code, message: result.error.message };
    },
    async stop() {
      await vm.stop();
      await conductor.close();
    },
  };
}
