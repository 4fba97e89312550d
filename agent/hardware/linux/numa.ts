import type { NumaTopology } from "../../../shared/inventory.ts";
import { listDir, readAttr, readInt } from "./sysfs.ts";

function nodeIds(entries: string[]): number[] {
  return entries
    .map((entry) => /^node(\d+)$/.exec(entry)?.[1])
    .filter((id) => id !== undefined)
    .map(Number)
    .sort((a, b) => a - b);
}

/** "Node 0 MemTotal:       16318460 kB" → 16318460; null when the line is missing. */
function memTotalKb(meminfo: string | null): number | null {
  const match = meminfo === null ? null : /MemTotal:\s*(\d+)\s*kB/.exec(meminfo);
  return match === null ? null : Number(match[1]);
}

/**
 * IPA's numa-topology collector from /sys/devices/system/node: RAM per node, physical cores per node with
 * their thread siblings, and the NUMA node of each NIC. Null when the kernel shows no NUMA nodes (IPA then
 * reports the collector as failed; the rest of the inspection goes on).
 */
export async function readNumaTopology(sys: string, nics: readonly string[]): Promise<NumaTopology | null> {
  const root = `${sys}/devices/system/node`;
  const ids = nodeIds(await listDir(root));
  if (ids.length === 0) return null;
  const ram: NumaTopology["ram"] = [];
  const cores = new Map<string, NumaTopology["cpus"][number]>();
  for (const id of ids) {
    const dir = `${root}/node${id}`;
    const size = memTotalKb(await readAttr(`${dir}/meminfo`));
    if (size !== null) ram.push({ numa_node: id, size_kb: size });
    const threads = (await listDir(dir))
      .map((entry) => /^cpu(\d+)$/.exec(entry)?.[1])
      .filter((thread) => thread !== undefined)
      .map(Number)
      .sort((a, b) => a - b);
    for (const thread of threads) {
      const core = await readInt(`${dir}/cpu${thread}/topology/core_id`);
      if (core === null) continue;
      const key = `${id}/${core}`;
      const item = cores.get(key) ?? { cpu: core, numa_node: id, thread_siblings: [] };
      item.thread_siblings.push(thread);
      cores.set(key, item);
    }
  }
  const nicNodes: NumaTopology["nics"] = [];
  for (const name of nics) {
    const node = await readInt(`${sys}/class/net/${name}/device/numa_node`);
    // -1 (the platform does not say) is kept as IPA keeps it
    if (node !== null) nicNodes.push({ name, numa_node: node });
  }
  return { ram, cpus: [...cores.values()], nics: nicNodes };
}
