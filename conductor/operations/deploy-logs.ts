import type { NodeRecord } from "../../shared/resources.ts";
import { fetchRamdiskLogs } from "../drivers/ramdisk-logs.ts";
import { NotFound } from "../errors.ts";
import type { DeployLogInfo } from "../history/deploy-logs.ts";
import { defineOperation, underLock, type OperationContext } from "./operation.ts";

/**
 * GET …/logs and …/logs/{id}: the node's deploy logs are files on the conductor that collected them, which is
 * the node's owner (its agent dials it): read there. No lock: they are not the node's state.
 */
export const READ_DEPLOY_LOGS = defineOperation({
  purpose: "reading deploy logs",
  shared: true,
  onOwner: true,
});

/** POST …/logs: the agent's logs now, under a shared lock (collect_logs is read-only on the agent). */
export const COLLECT_DEPLOY_LOGS = defineOperation({
  purpose: "collecting deploy logs",
  shared: true,
  onOwner: true,
});

/** The node's stored logs, oldest first (none when this conductor keeps none). */
export async function listDeployLogs(ctx: OperationContext, node: NodeRecord): Promise<DeployLogInfo[]> {
  return (await ctx.deps.deployLogs?.list(node.uuid)) ?? [];
}

/** @throws NotFound (Ironic's text shape) when the node has no log of that id */
export async function readDeployLog(
  ctx: OperationContext,
  node: NodeRecord,
  id: string,
): Promise<{ info: DeployLogInfo; archive: Buffer }> {
  const found = await ctx.deps.deployLogs?.read(node.uuid, id);
  if (!found) throw new NotFound(`Deploy log ${id} of node ${node.uuid} could not be found.`);
  return found;
}

/** The unpacked files of a stored log (masked when stored). */
export async function deployLogFiles(
  ctx: OperationContext,
  archive: Buffer,
): Promise<{ name: string; data: Buffer }[]> {
  return (await ctx.deps.deployLogs?.unpack(archive)) ?? [];
}

/**
 * Asks the node's agent for its logs now and stores them ("on request").
 * @throws Conflict (no agent connected), Invalid (collection is `never`), AgentCommandError, NodeLocked never
 * (a shared lock), what storing throws
 */
export async function collectDeployLogs(ctx: OperationContext, node: NodeRecord): Promise<DeployLogInfo> {
  return underLock(ctx, node, {
    spec: COLLECT_DEPLOY_LOGS,
    body: (task) => fetchRamdiskLogs(task, "on request"),
  });
}
