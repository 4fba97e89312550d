import type { Memory } from "../../../shared/inventory.ts";
import { listDir, readAttr } from "./sysfs.ts";

/** MemTotal from /proc/meminfo, in bytes. */
export function parseMemTotal(meminfo: string): number | null {
  const match = /^MemTotal:\s+(\d+)\s*kB/m.exec(meminfo);
  return match?.[1] === undefined ? null : Number(match[1]) * 1024;
}

/**
 * total: what the OS can use (MemTotal, as psutil reports). physical_mb: installed memory, from the
 * memory hotplug blocks in sysfs (online block count × block size), which include kernel-reserved memory
 * and so match a flavor's RAM better; null when the kernel has no memory blocks in sysfs.
 */
export async function readMemory(root: { proc: string; sys: string }): Promise<Memory> {
  const meminfo = await readAttr(`${root.proc}/meminfo`);
  const total = meminfo === null ? null : parseMemTotal(meminfo);
  if (total === null) throw new Error(`cannot read MemTotal from ${root.proc}/meminfo`);
  return { total, physical_mb: await physicalMb(root.sys) };
}

async function physicalMb(sys: string): Promise<number | null> {
  const base = `${sys}/devices/system/memory`;
  const blockSizeHex = await readAttr(`${base}/block_size_bytes`);
  if (blockSizeHex === null) return null;
  const blockSize = Number.parseInt(blockSizeHex, 16);
  const blocks = (await listDir(base)).filter((name) => /^memory\d+$/.test(name));
  if (!Number.isFinite(blockSize) || blocks.length === 0) return null;
  const states = await Promise.all(blocks.map((block) => readAttr(`${base}/${block}/online`)));
  const online = states.filter((state) => state === "1").length;
  return online === 0 ? null : Math.round((online * blockSize) / (1024 * 1024));
}
