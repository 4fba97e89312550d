import type { NodeRecord } from "../../shared/resources.ts";
import {
  TENANT_VIF_KEY,
  chooseFreePortLike,
  portLikeWithVif,
  vifOf,
  type PortLike,
  type VifRequest,
} from "../drivers/network/vif.ts";
import type { Store } from "../db/store.ts";
import { defineOperation, hardwareOf, underLock, type OperationContext } from "./operation.ts";

/** GET /v1/nodes/{id}/vifs: reads ports and port groups (Ironic's vif_list, a shared lock). */
export const LIST_VIFS = defineOperation({ purpose: "list vifs", shared: true, onOwner: false });
/** POST /v1/nodes/{id}/vifs (Ironic's vif_attach, under the exclusive lock). */
export const ATTACH_VIF = defineOperation({ purpose: "attach vif", shared: false, onOwner: false });
/** DELETE /v1/nodes/{id}/vifs/{vif} (Ironic's vif_detach, under the exclusive lock). */
export const DETACH_VIF = defineOperation({ purpose: "detach vif", shared: false, onOwner: false });

/** The `noop` network interface records nothing: no VIF is ever listed (Ironic's NoopNetwork). */
const recordsVifs = (node: NodeRecord): boolean => node.network_interface !== "noop";

async function portLikes(store: Store, node: string) {
  const [ports, portgroups] = await Promise.all([
    store.listPorts({ node_uuid: node }, {}),
    store.listPortgroups({ node_uuid: node }, {}),
  ]);
  return { ports, portgroups };
}

async function writeVif(store: Store, on: PortLike, vif: string | undefined): Promise<void> {
  const internal_info = { ...on.record.internal_info, [TENANT_VIF_KEY]: vif };
  const { vif_port_id: _legacy, ...extra } = on.record.extra;
  if (vif === undefined) delete internal_info[TENANT_VIF_KEY];
  const patch = { internal_info, ...(vif === undefined ? { extra } : {}) };
  if (on.kind === "port") await store.updatePort(on.record.uuid, patch);
  else await store.updatePortgroup(on.record.uuid, patch);
}

/** The node's VIFs: each port group's, then each port's (Ironic's VIFPortIDMixin.vif_list). */
export async function listVifs(ctx: OperationContext, node: NodeRecord): Promise<{ id: string }[]> {
  if (!recordsVifs(node)) return [];
  hardwareOf(ctx.drivers, node.driver);
  return underLock(ctx, node, {
    spec: LIST_VIFS,
    body: async () => {
      const { ports, portgroups } = await portLikes(ctx.deps.store, node.uuid);
      const ids = [...portgroups, ...ports].map(vifOf).filter((id): id is string => id !== null);
      return [...new Set(ids)].map((id) => ({ id }));
    },
  });
}

/**
 * Records the VIF on a free port or port group of the node. @throws NodeLocked (409), Conflict (already
 * attached), Invalid (no free port; a port or port group that is not the node's)
 */
export async function attachVif(ctx: OperationContext, node: NodeRecord, request: VifRequest): Promise<void> {
  hardwareOf(ctx.drivers, node.driver);
  await underLock(ctx, node, {
    spec: ATTACH_VIF,
    body: async () => {
      if (!recordsVifs(node)) return;
      const { ports, portgroups } = await portLikes(ctx.deps.store, node.uuid);
      const chosen = chooseFreePortLike(ports, portgroups, request);
      await writeVif(ctx.deps.store, chosen, request.id);
    },
  });
}

/** Removes the VIF from the port or port group holding it. @throws NodeLocked (409), Invalid (not attached) */
export async function detachVif(ctx: OperationContext, node: NodeRecord, vif: string): Promise<void> {
  hardwareOf(ctx.drivers, node.driver);
  await underLock(ctx, node, {
    spec: DETACH_VIF,
    body: async () => {
      if (!recordsVifs(node)) return;
      const { ports, portgroups } = await portLikes(ctx.deps.store, node.uuid);
      await writeVif(
        ctx.deps.store,
        portLikeWithVif(ports, portgroups, { id: vif, node: node.uuid }),
        undefined,
      );
    },
  });
}
