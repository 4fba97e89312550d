import { eraseMetadataArgs } from "../../shared/erase.ts";
import type { Task } from "../tasks/task.ts";
import { DONE, WAIT, type Flow, type FlowOutcome } from "./flow.ts";
import { bootIntoRamdisk, canFastTrack, leaveRamdisk, powerOffQuietly } from "./ramdisk.ts";

async function erase(task: Task): Promise<FlowOutcome> {
  await task.update({ clean_step: { step: "erase_devices_metadata", interface: "deploy", priority: 99 } });
  await task.deps.agents.call(
    task.node.uuid,
    // The node's skip_block_devices reach the agent, which leaves those disks alone (as IPA does).
    { name: "erase_devices_metadata", args: eraseMetadataArgs(task.node) },
    { signal: task.signal, timeoutMs: task.deps.config.agent.commandTimeoutS * 1000 },
  );
  await task.update({ clean_step: {} });
  await leaveRamdisk(task);
  return DONE;
}

/** Automated cleaning: metadata erase of every disk through the agent. */
export const agentClean: Flow = {
  async start(task) {
    // NOTE: automated_clean false skips cleaning, as in Ironic
    if (task.node.automated_clean === false) return DONE;
    if (canFastTrack(task)) return erase(task);
    await bootIntoRamdisk(task);
    return WAIT;
  },
  resume: erase,
  async onFail(task) {
    await task.update({ clean_step: {} }).catch(() => undefined);
    await powerOffQuietly(task);
  },
};
