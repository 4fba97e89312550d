import type { WireError } from "../../shared/errors.ts";
import type { CommandName, Progress } from "../../shared/protocol.ts";
import { AgentCommandError } from "./command-error.ts";

export interface PendingCall {
  id: string;
  uuid: string;
  name: CommandName;
  args: unknown;
  onProgress?: (progress: Progress) => void;
  /** The arguments for a re-send after a reconnect, when they may have changed (see CallOptions). */
  resendArgs?: () => unknown;
  settle: (outcome: { value: unknown } | { error: AgentCommandError }) => void;
}

/**
 * Calls waiting for their result, keyed by command id. They outlive connections: a result delivered
 * after the agent reconnects still finds its caller.
 */
export class PendingCalls {
  private readonly calls = new Map<string, PendingCall>();

  add(call: PendingCall): void {
    this.calls.set(call.id, call);
  }

  get(id: string): PendingCall | undefined {
    return this.calls.get(id);
  }

  /** Removes the call; returns it if it was still pending. */
  take(id: string): PendingCall | undefined {
    const call = this.calls.get(id);
    this.calls.delete(id);
    return call;
  }

  forNode(uuid: string): PendingCall[] {
    return [...this.calls.values()].filter((call) => call.uuid === uuid);
  }

  resolve(id: string, value: unknown): boolean {
    const call = this.take(id);
    call?.settle({ value });
    return call !== undefined;
  }

  reject(id: string, error: WireError | AgentCommandError): boolean {
    const call = this.take(id);
    const typed =
      error instanceof AgentCommandError
        ? error
        : new AgentCommandError(error.code, error.message, error.retryable);
    call?.settle({ error: typed });
    return call !== undefined;
  }

  rejectAll(error: AgentCommandError): void {
    for (const id of [...this.calls.keys()]) this.reject(id, error);
  }
}
