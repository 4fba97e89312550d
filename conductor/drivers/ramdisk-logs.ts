import { z } from "zod";
import type { DeployLogInfo } from "../history/deploy-logs.ts";
import { Conflict, Invalid } from "../errors.ts";
import type { DriverTask } from "./task-context.ts";

const CollectLogsResult = z.object({ logs: z.string().max(64 * 1024 * 1024) });

type LogTask = Pick<DriverTask, "node" | "deps" | "log">;

/**
 * Asks the node's agent for its logs (collect_logs: the agent's own log, dmesg, the inventory, …) and stores
 * them (Ironic's collect_ramdisk_logs). Read-only on the agent: it runs beside any command.
 * @throws Conflict (no agent connected, or no store), Invalid (collection is `never`), AgentCommandError,
 * TarError or RangeError (the archive is malformed or too large), fs errors
 */
export async function fetchRamdiskLogs(task: LogTask, reason: string): Promise<DeployLogInfo> {
  const { deps, node } = task;
  if (deps.config.deployLogs.collect === "never")
    throw new Invalid("Deploy logs are not collected on this conductor (deploy_logs.collect is never).");
  if (!deps.deployLogs) throw new Conflict("This conductor keeps no deploy logs.");
  if (!deps.agents.isConnected(node.uuid))
    throw new Conflict(`Node ${node.uuid} has no agent connected to collect logs from.`);
  // NOTE: not the task's signal: a failure is often the task being aborted, and that is when logs matter
  const value = await deps.agents.call(
    node.uuid,
    { name: "collect_logs", args: {} },
    { timeoutMs: deps.config.deployLogs.timeoutS * 1000 },
  );
  const { logs } = CollectLogsResult.parse(value);
  const info = await deps.deployLogs.save(node, Buffer.from(logs, "base64"), { reason });
  task.log.info({ id: info.id, reason, bytes: info.size }, "deploy ramdisk logs stored");
  return info;
}

/**
 * The conductor's own collection (a failure, or any end of in-band work with `always`): only as configured,
 * only while the agent is connected, and never throws (a log that cannot be had must not change the outcome).
 */
export async function collectRamdiskLogs(
  task: LogTask,
  reason: string,
  when: "failure" | "success",
): Promise<DeployLogInfo | null> {
  const { collect } = task.deps.config.deployLogs;
  if (collect === "never" || (collect === "on_failure" && when === "success")) return null;
  if (!task.deps.deployLogs || !task.deps.agents.isConnected(task.node.uuid)) return null;
  try {
    return await fetchRamdiskLogs(task, reason);
  } catch (error) {
    task.log.warn({ err: error, reason }, "could not collect the deploy ramdisk's logs");
    return null;
  }
}

const WORK_OF_STATE: Readonly<Record<string, string>> = {
  cleaning: "clean",
  deploying: "deploy",
  inspecting: "inspect",
  servicing: "service",
  rescuing: "rescue",
};

/** The reason recorded for logs collected at the successful end of in-band work: "clean succeeded", … */
export function succeededReason(state: string): string {
  return `${WORK_OF_STATE[state] ?? state} succeeded`;
}
