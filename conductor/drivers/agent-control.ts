import type { CommandName } from "../../shared/protocol.ts";

/** What provisioning flows need from the agent gateway. */
export interface AgentControl {
  isConnected(nodeUuid: string): boolean;
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
    },
  ): Promise<unknown>;
}
