import { machine } from "node:os";
import type { Cpu } from "../../../shared/inventory.ts";
import { listDir, readAttr, readInt } from "./sysfs.ts";

/** Parses /proc/cpuinfo into per-processor key/value blocks. */
export function parseCpuinfo(text: string): Array<Map<string, string>> {
  const blocks: Array<Map<string, string>> = [];
  for (const chunk of text.split(/\n\s*\n/)) {
    const block = new Map<string, string>();
    for (const line of chunk.split("\n")) {
      const colon = line.indexOf(":");
      if (colon < 0) continue;
      block.set(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
    }
    if (block.size > 0) blocks.push(block);
  }
  return blocks;
}

/** Counts CPUs in a kernel cpulist such as "0-3,8,10-11". */
export function countCpuList(list: string): number {
  let count = 0;
  for (const part of list.split(",")) {
    const [from, to] = part.split("-").map((n) => Number.parseInt(n, 10));
    if (from === undefined || !Number.isFinite(from)) continue;
    count += to === undefined || !Number.isFinite(to) ? 1 : to - from + 1;
  }
  return count;
}

export async function readCpu(root: { proc: string; sys: string }): Promise<Cpu> {
  const blocks = parseCpuinfo((await readAttr(`${root.proc}/cpuinfo`)) ?? "");
  const processors = blocks.filter((block) => block.has("processor"));
  const first = processors[0] ?? blocks[0] ?? new Map<string, string>();
  // Online CPUs, like lscpu's "CPU(s)"; /proc/cpuinfo is the fallback when sysfs is missing.
  const online = await readAttr(`${root.sys}/devices/system/cpu/online`);
  const count = online ? countCpuList(online) : Math.max(processors.length, 1);
  const sockets = new Set(
    processors.map((block) => block.get("physical id")).filter((id) => id !== undefined),
  );
  const maxKhz = await readInt(`${root.sys}/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq`);
  const mhz = maxKhz !== null ? maxKhz / 1000 : Number.parseFloat(first.get("cpu MHz") ?? "0");
  return {
    model_name: first.get("model name") ?? first.get("Processor") ?? first.get("cpu model") ?? "",
    frequency: (Number.isFinite(mhz) ? mhz : 0).toFixed(4),
    count: Math.max(count, 1),
    architecture: machine(),
    flags: (first.get("flags") ?? first.get("Features") ?? "").split(/\s+/).filter((flag) => flag.length > 0),
    socket_count: Math.max(sockets.size, await countPackages(root.sys), 1),
  };
}

/** Sockets from sysfs topology, for kernels whose cpuinfo lacks "physical id". */
async function countPackages(sys: string): Promise<number> {
  const cpus = (await listDir(`${sys}/devices/system/cpu`)).filter((name) => /^cpu\d+$/.test(name));
  const ids = await Promise.all(
    cpus.map((cpu) => readAttr(`${sys}/devices/system/cpu/${cpu}/topology/physical_package_id`)),
  );
  return new Set(ids.filter((id) => id !== null)).size;
}
