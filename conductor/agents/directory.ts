import type { Hello } from "../../shared/protocol.ts";

export interface AgentNode {
  uuid: string;
  fastTrack: boolean;
  retiredBootId?: string;
  /** The node's conductor_group (where it lives on the hash ring); "" when none. */
  conductorGroup?: string;
}

/** What the agent gateway needs from the conductor's database (the core implements it over the Store). */
export interface AgentDirectory {
  /**
   * The node owning one of these MACs, among nodes in a state that expects an agent; null otherwise.
   * `retiredBootId`: the boot whose token the conductor ended (its agent may not be issued another).
   */
  lookupByMacs(macs: string[]): Promise<AgentNode | null>;
  /**
   * The token issued for the node's current boot of the ramdisk (its sha256 digest, never the token), or
   * null once the conductor cleared it. The boot id is kept for the log; it proves nothing.
   */
  tokenRecord(uuid: string): Promise<{ digest: string; bootId: string } | null>;
  saveToken(uuid: string, record: { digest: string; bootId: string }): Promise<void>;
  /**
   * Auto-discovery (absent when it is off): a hello whose MACs name no node expecting an agent may enroll a
   * new node for the machine. Returns the node to admit the agent for (the one just enrolled, or the one a
   * racing hello of the same machine enrolled), or null when the MACs belong to a known node that expects no
   * agent (the refusal stands).
   */
  discover?(hello: Pick<Hello, "macs" | "bmc_address">): Promise<AgentNode | null>;
}
