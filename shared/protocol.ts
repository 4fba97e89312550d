import { z } from "zod";
import { ERROR_CODES } from "./errors.ts";
import type { ErrorCode } from "./errors.ts";
import { AGENT_COMMANDS, COMMAND_NAMES } from "./agent-steps.ts";
import type { CommandArgs, CommandName } from "./agent-steps.ts";
import {
  SwarmAskSchema,
  SwarmDropSchema,
  SwarmHaveSchema,
  SwarmJoinSchema,
  SwarmLeaveSchema,
  SwarmReplySchema,
} from "./swarm.ts";
import { CheckpointSchema } from "./image.ts";

/**
 * The agent ⇄ conductor wire: one WebSocket per node, JSON text frames, each a member of `FrameSchema`.
 * Every frame carries `v: PROTOCOL_VERSION`; a peer refuses other versions with UNSUPPORTED_VERSION.
 */
export const PROTOCOL_VERSION = 1;
const v = z.literal(PROTOCOL_VERSION);

export { COMMAND_NAMES } from "./agent-steps.ts";
export type { CommandArgs, CommandName } from "./agent-steps.ts";
export const CommandNameSchema = z.enum(COMMAND_NAMES);

/** Commands that only read; they may run while a mutating command is in flight. */
export const READ_ONLY_COMMANDS: ReadonlySet<CommandName> = new Set(
  COMMAND_NAMES.filter((name) => AGENT_COMMANDS[name].readOnly),
);

const MacSchema = z
  .string()
  .regex(/^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$/, "expected a MAC address like 52:54:00:12:34:56")
  .transform((mac) => mac.toLowerCase());

const Id = z.string().min(1).max(128);

export const HelloSchema = z.object({
  type: z.literal("hello"),
  v,
  agent_version: z.string().max(64),
  macs: z.array(MacSchema).min(1).max(64),
  bmc_address: z.string().max(64).nullable(),
  boot_id: z.string().min(1).max(64),
  token: z.string().min(1).max(256).optional(),
  /** Set when a conductor's redirect sent the agent here: served where it lands (one hop, no ping-pong). */
  redirected: z.boolean().optional(),
});

export const WelcomeSchema = z.object({
  type: z.literal("welcome"),
  v,
  node_uuid: z.string(),
  /** Present only in the welcome that issues it (once per boot). */
  token: z.string().optional(),
  heartbeat_interval_ms: z.number().int().positive(),
  fast_track: z.boolean(),
});

export const CommandSchema = z.object({
  type: z.literal("command"),
  v,
  id: Id,
  name: CommandNameSchema,
  /** Checked against COMMAND_ARGS[name] by the agent, so a bad argument fails that command, not the link. */
  args: z.unknown(),
});

export const ProgressSchema = z.object({
  type: z.literal("progress"),
  v,
  id: Id,
  step: z.string().optional(),
  bytes_done: z.number().nonnegative().optional(),
  bytes_total: z.number().nonnegative().nullable().optional(),
  rate_bps: z.number().nonnegative().optional(),
  message: z.string().optional(),
  /** write_image: the image's first bytes are durable on the disk (the conductor keeps it to resume). */
  checkpoint: CheckpointSchema.optional(),
});

export const WireErrorSchema = z.object({
  code: z.enum(ERROR_CODES),
  message: z.string(),
  retryable: z.boolean(),
});

const ResultOkSchema = z.object({
  type: z.literal("result"),
  v,
  id: Id,
  ok: z.literal(true),
  value: z.unknown(),
});
const ResultErrorSchema = z.object({
  type: z.literal("result"),
  v,
  id: Id,
  ok: z.literal(false),
  error: WireErrorSchema,
});
export const ResultSchema = z.discriminatedUnion("ok", [ResultOkSchema, ResultErrorSchema]);

export const AckSchema = z.object({ type: z.literal("ack"), v, id: Id });
export const CancelSchema = z.object({ type: z.literal("cancel"), v, id: Id });
export const HeartbeatSchema = z.object({
  type: z.literal("heartbeat"),
  v,
  ts: z.number(),
  /** The id of the mutating command the agent is running, if any. */
  busy: Id.optional(),
});
export const ErrorFrameSchema = z.object({
  type: z.literal("error"),
  v,
  code: z.enum(ERROR_CODES),
  message: z.string(),
});

/** A ws:// or wss:// URL of a conductor's agent endpoint. */
export const AgentEndpointSchema = z
  .string()
  .max(512)
  .refine((text) => {
    try {
      const url = new URL(text);
      return (
        (url.protocol === "ws:" || url.protocol === "wss:") && url.username === "" && url.password === ""
      );
    } catch {
      return false;
    }
  }, "expected a ws:// or wss:// URL without credentials");

/**
 * Conductor → agent, in answer to a hello: this conductor does not own the node; dial `url` (the owner's agent
 * endpoint) instead. The agent keeps its token and its unacknowledged results; the conductor closes the socket.
 */
export const RedirectSchema = z.object({
  type: z.literal("redirect"),
  v,
  url: AgentEndpointSchema,
  /** The owner's name (Ironic's conductor hostname), for the agent's log. */
  conductor: z.string().max(255).optional(),
});

/** Swarm deploys (shared/swarm.ts): the agent asks, the conductor tracks and answers. */
export const SwarmJoinFrameSchema = SwarmJoinSchema.extend({ v });
export const SwarmAskFrameSchema = SwarmAskSchema.extend({ v });
export const SwarmHaveFrameSchema = SwarmHaveSchema.extend({ v });
export const SwarmDropFrameSchema = SwarmDropSchema.extend({ v });
export const SwarmLeaveFrameSchema = SwarmLeaveSchema.extend({ v });
export const SwarmReplyFrameSchema = SwarmReplySchema.extend({ v });

export const FrameSchema = z.discriminatedUnion("type", [
  HelloSchema,
  WelcomeSchema,
  CommandSchema,
  ProgressSchema,
  ResultSchema,
  AckSchema,
  CancelSchema,
  HeartbeatSchema,
  ErrorFrameSchema,
  RedirectSchema,
  SwarmJoinFrameSchema,
  SwarmAskFrameSchema,
  SwarmHaveFrameSchema,
  SwarmDropFrameSchema,
  SwarmLeaveFrameSchema,
  SwarmReplyFrameSchema,
]);
export type Frame = z.infer<typeof FrameSchema>;
export type FrameType = Frame["type"];
export type Hello = z.infer<typeof HelloSchema>;
export type Welcome = z.infer<typeof WelcomeSchema>;
export type CommandFrame = z.infer<typeof CommandSchema>;
export type ProgressFrame = z.infer<typeof ProgressSchema>;
export type ResultFrame = z.infer<typeof ResultSchema>;
export type HeartbeatFrame = z.infer<typeof HeartbeatSchema>;
export type ErrorFrame = z.infer<typeof ErrorFrameSchema>;
export type RedirectFrame = z.infer<typeof RedirectSchema>;
export type SwarmReplyFrame = z.infer<typeof SwarmReplyFrameSchema>;
/** A progress report without its envelope (what command handlers and call() listeners see). */
export type Progress = Omit<ProgressFrame, "type" | "v" | "id">;

const FRAME_TYPES: ReadonlySet<string> = new Set([
  "hello",
  "welcome",
  "command",
  "progress",
  "result",
  "ack",
  "cancel",
  "heartbeat",
  "error",
  "redirect",
  "swarm_join",
  "swarm_ask",
  "swarm_have",
  "swarm_drop",
  "swarm_leave",
  "swarm_reply",
]);

// ---- per-command arguments ----

/** Each command's argument schema, from the catalogue. */
export const COMMAND_ARGS: { readonly [N in CommandName]: (typeof AGENT_COMMANDS)[N]["args"] } =
  Object.fromEntries(COMMAND_NAMES.map((name) => [name, AGENT_COMMANDS[name].args])) as {
    [N in CommandName]: (typeof AGENT_COMMANDS)[N]["args"];
  };

// ---- parsing ----

export type ParseResult =
  { ok: true; frame: Frame } | { ok: false; error: { code: ErrorCode; message: string }; id?: string };

/**
 * Parses one text frame. Never throws: every failure is a value with a protocol error code.
 * The size limit is checked first, in UTF-8 bytes, so an oversized frame is never JSON-parsed.
 */
export function parseFrame(text: string, maxBytes: number): ParseResult {
  // Each UTF-16 unit is at most 3 UTF-8 bytes: skip the exact count when it cannot matter.
  if (text.length * 3 > maxBytes && Buffer.byteLength(text, "utf8") > maxBytes) {
    return fail("FRAME_TOO_LARGE", `frame exceeds ${maxBytes} bytes`);
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return fail("BAD_FRAME", "frame is not valid JSON");
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    return fail("BAD_FRAME", "frame is not a JSON object");
  }
  const record = data as Record<string, unknown>;
  if (typeof record.type !== "string") return fail("BAD_FRAME", "frame has no string `type`");
  if (record.v !== PROTOCOL_VERSION) {
    return fail(
      "UNSUPPORTED_VERSION",
      `protocol version ${JSON.stringify(record.v)} is not ${PROTOCOL_VERSION}`,
    );
  }
  if (!FRAME_TYPES.has(record.type)) {
    return fail("UNKNOWN_TYPE", `frame type ${JSON.stringify(record.type).slice(0, 64)} is unknown`);
  }
  const parsed = FrameSchema.safeParse(data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.join(".") ?? "";
    const error = {
      code: "BAD_FRAME" as const,
      message: `invalid ${record.type} frame: ${where} ${issue?.message ?? ""}`,
    };
    return typeof record.id === "string" ? { ok: false, error, id: record.id } : { ok: false, error };
  }
  return { ok: true, frame: parsed.data };
}

function fail(code: ErrorCode, message: string): ParseResult {
  return { ok: false, error: { code, message } };
}

/** Serialises a frame; the one place frames become text, so `v` is never forgotten. */
export function encodeFrame(frame: DistributiveOmit<Frame, "v">): string {
  return JSON.stringify({ ...frame, v: PROTOCOL_VERSION });
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
export type OutgoingFrame = DistributiveOmit<Frame, "v">;

/**
 * Checks a command's arguments against its schema.
 * @returns the parsed arguments, or an error message for a BAD_ARGS result.
 */
export function parseCommandArgs<N extends CommandName>(
  name: N,
  args: unknown,
): { ok: true; args: CommandArgs<N> } | { ok: false; message: string } {
  const parsed = COMMAND_ARGS[name].safeParse(args ?? {});
  if (parsed.success) return { ok: true, args: parsed.data as CommandArgs<N> };
  const issue = parsed.error.issues[0];
  return {
    ok: false,
    message: `${name}: ${issue?.path.join(".") ?? ""} ${issue?.message ?? "invalid"}`.trim(),
  };
}
