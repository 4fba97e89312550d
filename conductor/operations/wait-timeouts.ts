import type { NodeRecord } from "../../shared/resources.ts";
import { failWork } from "../flows/drive.ts";
import { WAIT_STATES } from "../states/machine.ts";
import type { TaskDeps } from "../tasks/task.ts";
import type { Provisioner } from "./provisioner.ts";

/** Each wait state's limit in the conductor's [timeouts] (Ironic's *_callback_timeout). */
const WAIT_TIMEOUT_KEY: Record<string, keyof TaskDeps["config"]["timeouts"]> = {
  "inspect wait": "inspectWaitS",
  "clean wait": "cleanWaitS",
  "wait call-back": "deployWaitS",
  "rescue wait": "rescueWaitS",
  "service wait": "serviceWaitS",
};

/**
 * Fails nodes that waited for their agent longer than their state's timeout (Ironic's
 * _check_deploy_timeouts and kin), each under its lock; a node locked by other work is left for the next
 * check. Returns the nodes failed.
 */
export async function failTimedOut(
  provisioner: Provisioner,
  options: { now?: number; isMine?: (node: NodeRecord) => boolean } = {},
): Promise<string[]> {
  const { now = Date.now(), isMine = () => true } = options;
  const { config, store } = provisioner.deps;
  const failed: string[] = [];
  for (const state of WAIT_STATES) {
    const limitS = config.timeouts[WAIT_TIMEOUT_KEY[state] ?? "deployWaitS"];
    for (const node of await store.listNodes({ provision_state: state }, {})) {
      const since = Date.parse(node.provision_updated_at ?? node.updated_at ?? node.created_at);
      if (now - since < limitS * 1000 || !isMine(node)) continue;
      const lock = await provisioner.tryAcquire(node, "timeout");
      if (!lock) continue; // other work holds it: the next check looks again
      await lock.run(async (task) => {
        await failWork(
          task,
          `Timeout reached while waiting for callback for node ${node.uuid} in "${state}"`,
        );
        failed.push(node.uuid);
      });
    }
  }
  return failed;
}
