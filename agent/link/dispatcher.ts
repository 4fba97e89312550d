import { CodedError, toWireError } from "../../shared/errors.ts";
import type { WireError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";
import { READ_ONLY_COMMANDS, parseCommandArgs } from "../../shared/protocol.ts";
import type { CommandFrame, CommandName, OutgoingFrame } from "../../shared/protocol.ts";
import type { CommandContext, CommandTable } from "../commands/command.ts";
import type { HardwareBackend } from "../hardware/backend.ts";
import type { SwarmLink } from "../swarm/swarm-link.ts";

type ResultOut = Extract<OutgoingFrame, { type: "result" }>;
type AnyHandler = (args: unknown, context: CommandContext) => Promise<unknown>;

export interface DispatcherOptions {
  backend: HardwareBackend;
  commands: CommandTable;
  logger: Logger;
  /** Sends a frame on the current link; returns false when there is no open link. */
  send(frame: OutgoingFrame): boolean;
  /** How long after-result actions (reboot) wait for the conductor's ack. */
  ackGraceMs?: number;
  /** The agent's recent log lines (collect_logs sends them). */
  recentLog?: () => string;
  /** The line to the conductor's swarm tracker (write_image with swarm). */
  swarm?: SwarmLink;
}

/** How many acknowledged ids to remember, so a command re-sent after a reconnect is not run twice. */
const ACKED_MEMORY = 1024;
/**
 * How many acknowledged results to keep answering with. A conductor that took a node over from a dead one
 * asks again for the command that was in flight, by its id; the dead one may have acknowledged the result
 * just before it died, and the work is not done again for that (a re-written disk).
 */
const KEPT_RESULTS = 16;

/**
 * Runs commands: one mutating command at a time (a second gets BUSY; read-only ones run alongside),
 * cancellation through AbortSignal, and every result kept until the conductor acknowledges it, so a
 * result produced while the link was down is delivered after the reconnect.
 */
export class CommandDispatcher {
  private readonly running = new Map<string, { name: CommandName; controller: AbortController }>();
  private readonly unacked = new Map<string, ResultOut>();
  private readonly acked = new Set<string>();
  private readonly keptAfterAck = new Map<string, ResultOut>();
  private readonly afterAck = new Map<string, Array<() => Promise<void>>>();
  private mutatingId: string | undefined;

  constructor(private readonly options: DispatcherOptions) {}

  /** The id of the running mutating command, for heartbeats. */
  get busy(): string | undefined {
    return this.mutatingId;
  }

  /** Results waiting for an ack (tests and shutdown look at it). */
  get pendingResults(): number {
    return this.unacked.size;
  }

  handleCommand(frame: CommandFrame): void {
    const { id, name } = frame;
    if (this.running.has(id)) return; // a re-sent command: already ours
    const kept = this.unacked.get(id) ?? this.keptAfterAck.get(id);
    if (kept) {
      this.options.send(kept);
      return;
    }
    if (this.acked.has(id)) return; // answered long ago: never run twice
    const handler = this.options.commands[name] as AnyHandler | undefined;
    if (handler === undefined) {
      return this.finish(id, {
        error: new CodedError("NOT_SUPPORTED", `${name} is not supported by this agent`),
      });
    }
    const parsed = parseCommandArgs(name, frame.args);
    if (!parsed.ok) return this.finish(id, { error: new CodedError("BAD_ARGS", parsed.message) });
    const mutating = !READ_ONLY_COMMANDS.has(name);
    if (mutating && this.mutatingId !== undefined) {
      const running = this.running.get(this.mutatingId)?.name ?? "a command";
      return this.finish(id, { error: new CodedError("BUSY", `${running} (${this.mutatingId}) is running`) });
    }
    const controller = new AbortController();
    this.running.set(id, { name, controller });
    if (mutating) this.mutatingId = id;
    const logger = this.options.logger.child({ command: name, id });
    logger.info("command started");
    const context: CommandContext = {
      backend: this.options.backend,
      signal: controller.signal,
      logger,
      progress: (progress) => void this.options.send({ type: "progress", id, ...progress }),
      ...(this.options.recentLog ? { recentLog: this.options.recentLog } : {}),
      ...(this.options.swarm ? { swarm: this.options.swarm } : {}),
      afterResult: (action) => this.afterAck.set(id, [...(this.afterAck.get(id) ?? []), action]),
    };
    const started = Date.now();
    handler(parsed.args, context).then(
      (value) => {
        logger.info({ duration_ms: Date.now() - started }, "command succeeded");
        this.finish(id, { value, controller });
      },
      (error: unknown) => {
        const wire = controller.signal.aborted ? cancelled(error) : toWireError(error);
        logger.warn({ code: wire.code, err: wire.message }, "command failed");
        this.finish(id, { error: wire, controller });
      },
    );
  }

  /** Aborts a running command; its handler decides how fast it stops, and its result says CANCELLED. */
  handleCancel(id: string): void {
    this.running.get(id)?.controller.abort(new CodedError("CANCELLED", "cancelled by the conductor"));
  }

  handleAck(id: string): void {
    const frame = this.unacked.get(id);
    if (!frame) return;
    this.unacked.delete(id);
    this.keptAfterAck.set(id, frame);
    if (this.keptAfterAck.size > KEPT_RESULTS) {
      const oldest = this.keptAfterAck.keys().next().value;
      if (oldest !== undefined) this.keptAfterAck.delete(oldest);
    }
    this.acked.add(id);
    if (this.acked.size > ACKED_MEMORY) {
      const oldest = this.acked.values().next().value;
      if (oldest !== undefined) this.acked.delete(oldest);
    }
    this.runAfterAck(id);
  }

  /** Re-sends every unacknowledged result (called after each welcome). */
  resendUnacked(): void {
    for (const frame of this.unacked.values()) this.options.send(frame);
  }

  /** Aborts everything that runs (agent shutdown). */
  abortAll(): void {
    for (const { controller } of this.running.values())
      controller.abort(new CodedError("CANCELLED", "agent stopping"));
  }

  private finish(
    id: string,
    outcome: { value?: unknown; error?: WireError | CodedError; controller?: AbortController },
  ): void {
    if (outcome.controller && this.running.get(id)?.controller === outcome.controller) {
      this.running.delete(id);
      if (this.mutatingId === id) this.mutatingId = undefined;
    }
    const frame: ResultOut =
      outcome.error === undefined
        ? { type: "result", id, ok: true, value: outcome.value ?? null }
        : { type: "result", id, ok: false, error: toWire(outcome.error) };
    this.unacked.set(id, frame);
    this.options.send(frame);
    if (this.afterAck.has(id)) {
      // Act even without an ack: the conductor may be gone for good, and a reboot was what it asked for.
      setTimeout(() => this.runAfterAck(id), this.options.ackGraceMs ?? 5_000).unref();
    }
  }

  private runAfterAck(id: string): void {
    const actions = this.afterAck.get(id);
    if (!actions) return;
    this.afterAck.delete(id);
    for (const action of actions) {
      action().catch((error: unknown) =>
        this.options.logger.error({ id, err: toWireError(error).message }, "after-result action failed"),
      );
    }
  }
}

function toWire(error: WireError | CodedError): WireError {
  return error instanceof CodedError ? toWireError(error) : error;
}

function cancelled(error: unknown): WireError {
  const wire = toWireError(error);
  return wire.code === "CANCELLED"
    ? wire
    : { code: "CANCELLED", message: "cancelled by the conductor", retryable: false };
}
