import type { Logger } from "../../shared/log.ts";
import type { AgentGateway } from "../agents/gateway.ts";
import { agentEndpointOf } from "../agents/endpoint.ts";
import type { AgentOwner, OwnerElsewhere } from "../agents/handshake.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import type { Store } from "../db/store.ts";
import type { Membership, RingKey } from "./membership.ts";

/** The node's owner as an agent should dial it, when that is another live conductor with a known URL. */
function ownerOtherThanMe(membership: Membership, node: RingKey): AgentOwner | null {
  const owner = membership.ownerOf(node);
  if (!owner?.url || owner.identity === membership.identity) return null;
  return { url: agentEndpointOf(owner.url), conductor: owner.hostname };
}

/** The agent gateway's question "whose agent is this?", answered by the hash ring. */
export function ringOwnerElsewhere(membership: Membership): OwnerElsewhere {
  return (node) =>
    ownerOtherThanMe(membership, { uuid: node.uuid, conductor_group: node.conductorGroup ?? "" });
}

export interface RehomeDeps {
  store: Store;
  membership: Membership;
  gateway: Pick<AgentGateway, "sessionNodes" | "redirect">;
  /** Work of ours holds the node's lock: its agent stays until the work lets go (never moved mid-step). */
  isWorking(uuid: string): boolean;
  /** Would a conductor admit an agent for the node in its state? If not, moving it would only strand it. */
  acceptsAgent(node: NodeRecord): boolean;
  logger: Logger;
}

/**
 * Agents connected here whose node another conductor now owns (it joined, or the ring moved the node) are
 * sent there once no work of ours runs on the node, so the owner can command them. Returns the nodes moved.
 */
export async function rehomeAgents(deps: RehomeDeps): Promise<string[]> {
  const moved: string[] = [];
  for (const uuid of deps.gateway.sessionNodes()) {
    if (deps.isWorking(uuid)) continue;
    const node = await deps.store.getNode(uuid);
    const owner = node === null || !deps.acceptsAgent(node) ? null : ownerOtherThanMe(deps.membership, node);
    if (owner === null || deps.isWorking(uuid)) continue;
    if (deps.gateway.redirect(uuid, owner)) moved.push(uuid);
  }
  if (moved.length > 0) deps.logger.info({ nodes: moved.length }, "agents sent to their nodes' new owners");
  return moved;
}
