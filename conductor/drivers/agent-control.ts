import type { CommandName } from "../../shared/protocol.ts";

/** What provisioning flows need from the agent gateway. */
export interface AgentControl {
  isConnected(nodeUuid: string): boolean;
  /**
   * Ends the node's agent session at once (its socket cut, isConnected false): the node was just powered off
   * or rebooted, so the agent of that boot is gone even if its connection has not timed out yet. Commands
   * waiting on it stay pending (a live agent redials with its token and answers them).
   */
  retire?(nodeUuid: string): void;
  /** The address a connected agent dialled from (its provisioning address, as far as we can tell). */
  addressOf?(nodeUuid: string): string | undefined;
  /** Runs one agent command and resolves with its value. @throws when the agent reports an error or the link fails */
  call(
    nodeUuid: string,
    command: { name: CommandName; args: unknown },
    options?: {
      signal?: AbortSignal;
      onProgress?: (progress: unknown) => void;
      timeoutMs?: number;
      /** A kept id: asking again re-attaches to the command (see CallOptions.id). */
      id?: string;
      /** The arguments for a re-send after a reconnect (see CallOptions.resendArgs). */
      resendArgs?: () => unknown;
    },
  ): Promise<unknown>;
}
