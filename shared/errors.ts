/**
 * The one catalogue of error codes that cross the agent ⇄ conductor wire.
 * `retryable` says whether the same request may succeed later without a human changing anything.
 */
export const ERROR_CATALOGUE = {
  BAD_FRAME: { retryable: false, message: "frame is not valid JSON or does not match the protocol schema" },
  UNKNOWN_TYPE: { retryable: false, message: "frame type is not part of this protocol version" },
  UNSUPPORTED_VERSION: { retryable: false, message: "protocol version is not supported" },
  FRAME_TOO_LARGE: { retryable: false, message: "frame exceeds the maximum size" },
  HELLO_REQUIRED: { retryable: false, message: "the first frame must be a hello" },
  UNKNOWN_MAC: { retryable: true, message: "no node expecting an agent has one of these MAC addresses" },
  BAD_TOKEN: { retryable: false, message: "the agent token is not valid for this node" },
  TOKEN_REQUIRED: {
    retryable: false,
    message: "a token was already issued for this boot; hello must carry it",
  },
  REPLACED: { retryable: true, message: "another connection for this node took over" },
  RATE_LIMITED: { retryable: true, message: "the connection sent more frames than the conductor reads" },
  BUSY: { retryable: true, message: "another mutating command is running" },
  UNKNOWN_COMMAND: { retryable: false, message: "command name is not known" },
  NOT_SUPPORTED: { retryable: false, message: "command is not supported by this agent or backend" },
  BAD_ARGS: { retryable: false, message: "command arguments do not match the command's schema" },
  NO_ROOT_DEVICE: { retryable: false, message: "no disk matches the root device hints" },
  CANCELLED: { retryable: false, message: "command was cancelled" },
  TIMEOUT: { retryable: true, message: "command did not finish in time" },
  NOT_CONNECTED: { retryable: true, message: "the node's agent is not connected" },
  AGENT_REBOOTED: {
    retryable: true,
    message: "the node booted again while the command ran; its agent is gone",
  },
  GATEWAY_CLOSED: { retryable: true, message: "the agent gateway is shutting down" },
  COMMAND_FAILED: { retryable: false, message: "command failed" },
  COMMAND_FAILED_RETRYABLE: { retryable: true, message: "command failed; it may succeed when retried" },
} as const satisfies Record<string, { retryable: boolean; message: string }>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;
export const ERROR_CODES = Object.keys(ERROR_CATALOGUE) as [ErrorCode, ...ErrorCode[]];

export function isRetryable(code: ErrorCode): boolean {
  return ERROR_CATALOGUE[code].retryable;
}

/** An error that carries a wire code; anything thrown inside a command is normalised to one of these. */
export class CodedError extends Error {
  readonly retryable: boolean;
  constructor(
    readonly code: ErrorCode,
    message?: string,
    options?: { cause?: unknown; retryable?: boolean },
  ) {
    super(message ?? ERROR_CATALOGUE[code].message, { cause: options?.cause });
    this.name = "CodedError";
    this.retryable = options?.retryable ?? ERROR_CATALOGUE[code].retryable;
  }
}

/** The serialisable error body of a failed result. */
export interface WireError {
  code: ErrorCode;
  message: string;
  retryable: boolean;
}

/** Normalises any thrown value at the wire boundary (unknown throws become COMMAND_FAILED). */
export function toWireError(error: unknown): WireError {
  if (error instanceof CodedError) {
    return { code: error.code, message: error.message, retryable: error.retryable };
  }
  if (error instanceof Error && error.name === "AbortError") {
    return { code: "CANCELLED", message: error.message, retryable: false };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { code: "COMMAND_FAILED", message, retryable: false };
}
