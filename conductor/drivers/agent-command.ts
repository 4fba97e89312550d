import type { CommandArgs, CommandName } from "../../shared/protocol.ts";
import type { Task } from "../tasks/task.ts";

/**
 * Runs one agent command for a step: cancelled with the task, bounded by the conductor's command timeout,
 * its progress frames published on the event stream.
 * @throws AgentCommandError when the agent reports an error or the link fails
 */
export function agentCommand<N extends CommandName>(
  task: Task,
  command: { name: N; args: CommandArgs<N> },
  onProgress?: (progress: unknown) => void,
): Promise<unknown> {
  return task.deps.agents.call(task.node.uuid, command, {
    signal: task.signal,
    timeoutMs: task.deps.config.agent.commandTimeoutS * 1000,
    onProgress: (progress) => {
      task.deps.publish({ type: "progress", node: task.node.uuid, step: command.name, progress });
      onProgress?.(progress);
    },
  });
}
