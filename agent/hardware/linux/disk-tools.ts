import { stat } from "node:fs/promises";
import type { Disk } from "../../../shared/inventory.ts";
import { exec } from "../../../shared/system/exec.ts";
import type { ExecResult } from "../../../shared/system/exec.ts";
import type { DiskCapabilities, DiskTools, NvmeCapabilities, ToolCall } from "../disk-tools.ts";
import { fileCapabilities, punchHole } from "../file-disk.ts";
import { parseHdparmIdentify } from "./hdparm-identify.ts";
import type { AtaIdentify } from "./hdparm-identify.ts";
import { parseNvmeIdentify } from "./nvme-identify.ts";
import { basename, listDir, readAttr, readInt } from "./sysfs.ts";

const PROBE_TIMEOUT_MS = 30_000;

/** Erase tools of a real machine: sysfs for the queue's limits, nvme-cli and hdparm for the drives' own. */
export class LinuxDiskTools implements DiskTools {
  constructor(private readonly sys = "/sys") {}

  async capabilities(disk: Disk, signal?: AbortSignal): Promise<DiskCapabilities> {
    const info = await stat(disk.name);
    if (info.isFile()) return fileCapabilities(disk);
    const name = basename(disk.name);
    const dir = `${this.sys}/block/${name}`;
    const [ro, discardMax, zeroesData, writeZeroesMax, raidMember] = await Promise.all([
      readAttr(`${dir}/ro`),
      readInt(`${dir}/queue/discard_max_bytes`),
      readInt(`${dir}/queue/discard_zeroes_data`),
      readInt(`${dir}/queue/write_zeroes_max_bytes`),
      heldByMd(dir, name),
    ]);
    const nvme = name.startsWith("nvme") ? await this.probeNvme(disk.name, signal) : null;
    const ata =
      name.startsWith("sd") || name.startsWith("hd") ? await this.probeAta(disk.name, signal) : null;
    // A loop device discards by punching a hole in its backing file: zeros, whatever discard_zeroes_data says
    // (the kernel has reported 0 there for every device since 4.12).
    const zeroes =
      zeroesData === 1 ||
      name.startsWith("loop") ||
      nvme?.deallocatedReadZero === true ||
      ata?.trimReadsZero === true;
    return {
      disk,
      kind: "block",
      readOnly: ro === "1",
      raidArray: /^md\d+$/.test(name) || name.startsWith("md_"),
      raidMember,
      discard: { supported: (discardMax ?? 0) > 0, zeroes },
      writeZeroes: (writeZeroesMax ?? 0) > 0,
      nvme,
      ata: ata?.security ?? null,
    };
  }

  async discard(device: string, options: ToolCall & { zeroOut: boolean }): Promise<void> {
    if ((await stat(device)).isFile()) return punchHole(device, options.signal);
    const args = options.zeroOut ? ["--zeroout", device] : [device];
    const result = await exec("blkdiscard", args, {
      signal: options.signal,
      timeoutMs: options.timeoutMs ?? 6 * 3600_000,
    });
    if (result.code !== 0) throw new Error(`blkdiscard ${args.join(" ")} failed: ${result.stderr.trim()}`);
  }

  nvme(args: readonly string[], options: ToolCall): Promise<ExecResult> {
    return exec("nvme", args, { signal: options.signal, timeoutMs: options.timeoutMs ?? PROBE_TIMEOUT_MS });
  }

  hdparm(args: readonly string[], options: ToolCall): Promise<ExecResult> {
    return exec("hdparm", args, { signal: options.signal, timeoutMs: options.timeoutMs ?? PROBE_TIMEOUT_MS });
  }

  smartctl(args: readonly string[], options: ToolCall): Promise<ExecResult> {
    return exec("smartctl", args, {
      signal: options.signal,
      timeoutMs: options.timeoutMs ?? PROBE_TIMEOUT_MS,
    });
  }

  /** null when nvme-cli is missing or the controller does not answer: then only software methods apply. */
  private async probeNvme(device: string, signal?: AbortSignal): Promise<NvmeCapabilities | null> {
    try {
      const ctrl = await this.nvme(["id-ctrl", device, "-o", "json"], { signal });
      if (ctrl.code !== 0) return null;
      const ns = await this.nvme(["id-ns", device, "-o", "json"], { signal });
      return parseNvmeIdentify(ctrl.stdout, ns.code === 0 ? ns.stdout : null);
    } catch (error) {
      if (signal?.aborted) throw error;
      return null;
    }
  }

  private async probeAta(device: string, signal?: AbortSignal): Promise<AtaIdentify | null> {
    try {
      const result = await this.hdparm(["-I", device], { signal });
      return result.code === 0 ? parseHdparmIdentify(result.stdout) : null;
    } catch (error) {
      if (signal?.aborted) throw error;
      return null;
    }
  }
}

/** Whether an md array holds the disk or one of its partitions (sysfs `holders` of each). */
async function heldByMd(dir: string, name: string): Promise<boolean> {
  const partitions = (await listDir(dir)).filter((entry) => entry.startsWith(name));
  for (const path of [dir, ...partitions.map((entry) => `${dir}/${entry}`)]) {
    if ((await listDir(`${path}/holders`)).some((holder) => holder.startsWith("md"))) return true;
  }
  return false;
}
