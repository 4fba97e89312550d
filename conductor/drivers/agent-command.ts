import type { CommandArgs, CommandName } from "../../shared/protocol.ts";
import { commandIdFor, commandSettled } from "./in-flight-command.ts";
import type { DriverTask as Task } from "./task-context.ts";

/**
 * Runs one agent command for a step: cancelled with the task, bounded by the conductor's command timeout,
 * its progress frames published on the event stream. Its id is recorded on the node before it is sent, so a
 * conductor that takes the node over mid-command asks for the same command again and gets its result.
 * `options.timeoutMs` replaces the command timeout for a command meant to run longer (a burn-in).
 * @throws AgentCommandError when the agent reports an error or the link fails
 */
export async function agentCommand<N extends CommandName>(
  task: Task,
  command: { name: N; args: CommandArgs<N> },
  options: {
    onProgress?: (progress: unknown) => void;
    timeoutMs?: number;
    /** The arguments to re-send after a reconnect, if they may have changed (see AgentControl.call). */
    resendArgs?: () => CommandArgs<N>;
  } = {},
): Promise<unknown> {
  const id = await commandIdFor(task, command.name);
  const value = await task.deps.agents.call(task.node.uuid, command, {
    signal: task.signal,
    timeoutMs: options.timeoutMs ?? task.deps.config.agent.commandTimeoutS * 1000,
    onProgress: (progress) => {
      task.deps.publish({ type: "progress", node: task.node.uuid, step: command.name, progress });
      options.onProgress?.(progress);
    },
    ...(id === undefined ? {} : { id }),
    ...(options.resendArgs === undefined ? {} : { resendArgs: options.resendArgs }),
  });
  // an error answer fails the step, and the failed plan's bookkeeping goes with it
  await commandSettled(task, command.name);
  return value;
}
