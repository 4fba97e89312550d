import type { AllocationSpec, NodeRecord } from "../../shared/resources.ts";

export interface AllocationRequest {
  traits: readonly string[];
  candidateNodes: readonly string[];
  spec: AllocationSpec | null;
}

function numberProperty(node: NodeRecord, key: string): number {
  const value = Number(node.properties[key]);
  return Number.isFinite(value) ? value : 0;
}

function capabilitiesOf(node: NodeRecord): Map<string, string> {
  const raw = node.properties.capabilities;
  const map = new Map<string, string>();
  if (typeof raw === "string") {
    for (const pair of raw.split(",")) {
      const [key, ...rest] = pair.split(":");
      if (key) map.set(key.trim(), rest.join(":").trim());
    }
  } else if (raw && typeof raw === "object") {
    for (const [key, value] of Object.entries(raw)) map.set(key, String(value));
  }
  return map;
}

/** Does the node satisfy the flavor-like spec? `exact` wants equal sizes, `best_fit` at least as big. Pure. */
export function fitsSpec(node: NodeRecord, spec: AllocationSpec): boolean {
  const sized: [number | undefined, number][] = [
    [spec.memory_mb, numberProperty(node, "memory_mb")],
    [spec.vcpus, numberProperty(node, "cpus")],
    [spec.local_gb, numberProperty(node, "local_gb")],
  ];
  for (const [wanted, has] of sized) {
    if (wanted === undefined) continue;
    if (spec.match === "exact" ? has !== wanted : has < wanted) return false;
  }
  if (spec.cpu_arch !== undefined && node.properties.cpu_arch !== spec.cpu_arch) return false;
  const capabilities = capabilitiesOf(node);
  for (const [key, value] of Object.entries(spec.capabilities ?? {})) {
    if (capabilities.get(key) !== value) return false;
  }
  return true;
}

export function matches(node: NodeRecord, request: AllocationRequest): boolean {
  if (request.candidateNodes.length > 0) {
    const ids = new Set(request.candidateNodes);
    if (!ids.has(node.uuid) && !(node.name !== null && ids.has(node.name))) return false;
  }
  if (!request.traits.every((trait) => node.traits.includes(trait))) return false;
  return request.spec === null || fitsSpec(node, request.spec);
}

/** Size order for best fit: memory, then CPUs, then disk. */
function footprint(node: NodeRecord): [number, number, number] {
  return [numberProperty(node, "memory_mb"), numberProperty(node, "cpus"), numberProperty(node, "local_gb")];
}

/**
 * Chooses among free nodes: with a spec, the smallest that fits (so a 16 GB request does not take the
 * 128 GB machine); without one, a random match (spreads load, as Ironic's shuffle does). Pure but for random.
 */
export function pickNode(
  candidates: readonly NodeRecord[],
  request: AllocationRequest,
  random: () => number = Math.random,
): NodeRecord | undefined {
  const fitting = candidates.filter((node) => matches(node, request));
  if (fitting.length === 0) return undefined;
  if (request.spec !== null) {
    return [...fitting].sort((a, b) => {
      const [fa, fb] = [footprint(a), footprint(b)];
      return fa[0] - fb[0] || fa[1] - fb[1] || fa[2] - fb[2] || a.uuid.localeCompare(b.uuid);
    })[0];
  }
  return fitting[Math.floor(random() * fitting.length)];
}
