import type { Frame, OutgoingFrame } from "../../shared/protocol.ts";
import type { SwarmAnswer } from "../../shared/swarm.ts";
import type { SwarmTracker } from "./swarm-tracker.ts";

export type SwarmFrame = Extract<
  Frame,
  { type: "swarm_join" | "swarm_ask" | "swarm_have" | "swarm_drop" | "swarm_leave" }
>;

/** The agent's address as it dialled us, without an IPv4-mapped prefix. */
function plainAddress(address: string): string {
  return address.startsWith("::ffff:") ? address.slice(7) : address;
}

/**
 * One swarm frame from a live agent session. Without a tracker (swarm off) every question is refused, so the
 * agent uses the store. An agent may only name a peer endpoint on the address it dialled us from: a node
 * cannot point its wave at another host. A TLS (https://) endpoint is taken only over a TLS link: its wave's
 * secret keys the peers' TLS, and must never be sent in the clear.
 */
export function handleSwarmFrame(
  tracker: SwarmTracker | undefined,
  from: { node: string; address: string; tls: boolean; send: (frame: OutgoingFrame) => void },
  frame: SwarmFrame,
): void {
  const { send } = from;
  const reply = (id: string, answer: SwarmAnswer): void => send({ type: "swarm_reply", id, answer });
  switch (frame.type) {
    case "swarm_join": {
      if (tracker === undefined) return reply(frame.id, { kind: "refused", message: "swarm is off" });
      const endpoint = new URL(frame.endpoint);
      const host = endpoint.hostname.replace(/^\[|\]$/g, "");
      if (plainAddress(host) !== plainAddress(from.address)) {
        return reply(frame.id, {
          kind: "refused",
          message: "the peer endpoint must be on the address the agent dialled from",
        });
      }
      if (endpoint.protocol === "https:" && !from.tls) {
        return reply(frame.id, {
          kind: "refused",
          message:
            "TLS peer links need a TLS link to the conductor (the wave's key would travel in the clear)",
        });
      }
      return reply(frame.id, tracker.join(from.node, frame));
    }
    case "swarm_ask":
      if (tracker === undefined) return reply(frame.id, { kind: "refused", message: "swarm is off" });
      void tracker.ask(from.node, frame.wave, frame.index).then((answer) => reply(frame.id, answer));
      return;
    case "swarm_have":
      tracker?.have(from.node, frame);
      return;
    case "swarm_drop":
      tracker?.drop(from.node, frame.wave, {
        index: frame.index,
        reason: frame.reason,
        ...(frame.peer === undefined ? {} : { peer: frame.peer }),
      });
      return;
    case "swarm_leave":
      tracker?.leave(from.node, frame.wave);
      return;
  }
}
