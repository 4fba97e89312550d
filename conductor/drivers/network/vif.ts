import type { JsonObject, PortRecord, PortgroupRecord } from "../../../shared/resources.ts";
import { Conflict, Invalid } from "../../errors.ts";

/** Where Ironic records a tenant VIF on a port or port group (NetType.TENANT.vif_key). */
export const TENANT_VIF_KEY = "tenant_vif_port_id";

/** A port or a port group: what a VIF can be attached to. */
export type PortLike = { kind: "port"; record: PortRecord } | { kind: "portgroup"; record: PortgroupRecord };

export interface VifRequest {
  id: string;
  port_uuid?: string;
  portgroup_uuid?: string;
}

/** The VIF recorded on a port-like object: the tenant key, or Ironic's legacy `extra.vif_port_id`. */
export function vifOf(record: { internal_info: JsonObject; extra: JsonObject }): string | null {
  const vif = record.internal_info[TENANT_VIF_KEY] ?? record.extra.vif_port_id;
  return typeof vif === "string" ? vif : null;
}

class VifAlreadyAttached extends Conflict {
  constructor(vif: string, on: PortLike) {
    const type = on.kind === "port" ? "Port" : "Portgroup";
    super(`Unable to attach VIF because VIF ${vif} is already attached to Ironic ${type} ${on.record.uuid}`);
  }
}

/** Ironic's _vif_attached: whether another VIF holds it. @throws VifAlreadyAttached when `vif` does */
function holdsVif(on: PortLike, vif: string): boolean {
  const attached = vifOf(on.record);
  if (attached === vif) throw new VifAlreadyAttached(vif, on);
  return attached !== null;
}

/**
 * The port or port group a VIF goes to, as Ironic's network common code chooses it
 * (get_free_port_like_object): free ones only; port groups with free member ports before lone ports, and
 * PXE-enabled ports first. Without Neutron no VIF names physical networks, so every port's is allowed.
 * @throws Conflict (the VIF is attached to one of them already), Invalid (no free port)
 */
export function chooseFreePortLike(
  ports: readonly PortRecord[],
  portgroups: readonly PortgroupRecord[],
  request: VifRequest,
): PortLike {
  const free: PortLike[] = [];
  const membersOf = new Map<string, PortRecord[]>();
  const unusableGroups = new Set<string>();
  for (const port of ports) {
    if (request.port_uuid && request.port_uuid !== port.uuid) continue;
    if (holdsVif({ kind: "port", record: port }, request.id)) {
      if (port.portgroup_uuid) unusableGroups.add(port.portgroup_uuid);
      continue;
    }
    if (port.portgroup_uuid === null && !request.portgroup_uuid) free.push({ kind: "port", record: port });
    else if (port.portgroup_uuid !== null) {
      membersOf.set(port.portgroup_uuid, [...(membersOf.get(port.portgroup_uuid) ?? []), port]);
    }
  }
  if (!request.port_uuid) {
    for (const group of portgroups) {
      if (request.portgroup_uuid && request.portgroup_uuid !== group.uuid) continue;
      if (holdsVif({ kind: "portgroup", record: group }, request.id)) continue;
      const members = membersOf.get(group.uuid) ?? [];
      if (unusableGroups.has(group.uuid)) {
        if (!request.portgroup_uuid)
          free.push(...members.map((record) => ({ kind: "port" as const, record })));
      } else if (members.length) free.push({ kind: "portgroup", record: group });
    }
  }
  const rank = (p: PortLike): number =>
    (p.kind === "portgroup" ? 2 : 0) + (p.kind === "portgroup" || p.record.pxe_enabled ? 1 : 0);
  // a stable sort keeps the store's order among equals, as Python's sorted does
  const [best] = [...free].sort((a, b) => rank(b) - rank(a));
  if (!best) throw new Invalid(`Unable to attach VIF ${request.id}, not enough free physical ports.`);
  return best;
}

/** Ironic's _get_port_like_obj_by_vif_id. @throws Invalid (VifNotAttached's text) */
export function portLikeWithVif(
  ports: readonly PortRecord[],
  portgroups: readonly PortgroupRecord[],
  vif: { id: string; node: string },
): PortLike {
  for (const record of portgroups) if (vifOf(record) === vif.id) return { kind: "portgroup", record };
  for (const record of ports) if (vifOf(record) === vif.id) return { kind: "port", record };
  throw new Invalid(`Unable to detach VIF ${vif.id} from node ${vif.node} because it is not attached to it.`);
}
