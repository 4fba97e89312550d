import type { SwarmAnswer } from "../../shared/swarm.ts";
import type { OutgoingFrame } from "../../shared/protocol.ts";

type WithoutId<T> = T extends unknown ? Omit<T, "id"> : never;
/** Questions to the tracker (they get a swarm_reply). */
export type SwarmQuestion = WithoutId<Extract<OutgoingFrame, { type: "swarm_join" | "swarm_ask" }>>;
/** Notices to the tracker (no answer). */
export type SwarmNotice = Extract<OutgoingFrame, { type: "swarm_have" | "swarm_drop" | "swarm_leave" }>;

/** The agent's line to the conductor's swarm tracker, over its WebSocket. */
export interface SwarmLink {
  /**
   * Asks and waits for the answer.
   * @throws SwarmLinkDown when the link is down or drops before the answer, or no answer comes in time.
   */
  ask(question: SwarmQuestion, timeoutMs: number): Promise<SwarmAnswer>;
  /** Sends a notice; false when the link is down (it is lost). */
  notify(notice: SwarmNotice): boolean;
  /** The local address of the link's socket (the provisioning address peers reach this agent at). */
  localAddress(): string | undefined;
  /**
   * Whether the link is TLS (wss://, the conductor's certificate verified): the wave's secret then reached
   * this agent encrypted, and may key TLS between the wave's peers.
   */
  secure(): boolean;
}

export class SwarmLinkDown extends Error {
  override name = "SwarmLinkDown";
}
