import { ERROR_CATALOGUE } from "../../shared/errors.ts";
import type { ErrorCode } from "../../shared/errors.ts";

/** How call() fails: the agent's error code, or the gateway's own (NOT_CONNECTED, TIMEOUT, CANCELLED…). */
export class AgentCommandError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string = ERROR_CATALOGUE[code].message,
    readonly retryable: boolean = ERROR_CATALOGUE[code].retryable,
  ) {
    super(message);
    this.name = "AgentCommandError";
  }
}

/** AGENT_REBOOTED: the node booted again under its agent; `bootId` is the boot that dialled in since. */
export class AgentRebooted extends AgentCommandError {
  constructor(
    readonly bootId: string,
    message: string,
  ) {
    super("AGENT_REBOOTED", message);
    this.name = "AgentRebooted";
  }
}
