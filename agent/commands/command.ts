import type { Logger } from "../../shared/log.ts";
import type { CommandArgs, CommandName, Progress } from "../../shared/protocol.ts";
import type { HardwareBackend } from "../hardware/backend.ts";
import type { SwarmLink } from "../swarm/swarm-link.ts";

/** What a command handler gets besides its arguments. */
export interface CommandContext {
  backend: HardwareBackend;
  /** Aborted when the conductor cancels the command. */
  signal: AbortSignal;
  /** Sends a progress frame (dropped while the link is down; the result is what must arrive). */
  progress(progress: Progress): void;
  /** Runs `action` once the result has been acknowledged (or after a grace period): reboot, power off. */
  afterResult(action: () => Promise<void>): void;
  logger: Logger;
  /** The agent's recent log lines (absent where the agent keeps none, as in tests' dispatchers). */
  recentLog?: () => string;
  /** The line to the conductor's swarm tracker, where the agent has one. */
  swarm?: SwarmLink;
}

/**
 * One command. It returns the result's value or throws; throw CodedError for a specific wire code
 * (anything else becomes COMMAND_FAILED).
 */
export type CommandHandler<N extends CommandName> = (
  args: CommandArgs<N>,
  context: CommandContext,
) => Promise<unknown>;

export type CommandTable = { [N in CommandName]?: CommandHandler<N> };
