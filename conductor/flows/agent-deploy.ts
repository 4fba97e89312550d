import type { Task } from "../tasks/task.ts";
import { DONE, WAIT, type Flow, type FlowOutcome } from "./flow.ts";
import type { UrlSigner } from "./image-request.ts";
import { writeRequestFromInstanceInfo } from "./image-request.ts";
import { bootIntoRamdisk, canFastTrack, powerOffQuietly } from "./ramdisk.ts";

/** How often deploy progress is written to the node (the event stream gets every frame). */
const PROGRESS_WRITE_MS = 1000;

function writeImage(sign: UrlSigner): (task: Task) => Promise<FlowOutcome> {
  return async (task) => {
    const request = writeRequestFromInstanceInfo(task.node.instance_info, {
      sign,
      rootDevice: task.node.properties.root_device,
      imageCa: task.deps.imageCa,
    });
    await task.update({ deploy_step: { step: "write_image", interface: "deploy", priority: 80 } });
    let lastWrite = 0;
    const result = await task.deps.agents.call(
      task.node.uuid,
      { name: "write_image", args: request },
      {
        signal: task.signal,
        timeoutMs: task.deps.config.agent.commandTimeoutS * 1000,
        onProgress: (progress) => {
          task.deps.publish({ type: "progress", node: task.node.uuid, step: "write_image", progress });
          const now = Date.now();
          if (now - lastWrite < PROGRESS_WRITE_MS) return;
          lastWrite = now;
          task
            .update({
              driver_internal_info: { ...task.node.driver_internal_info, deploy_progress: progress },
            })
            .catch(() => undefined);
        },
      },
    );
    await task.update({
      deploy_step: { step: "boot_instance", interface: "deploy", priority: 20 },
      driver_internal_info: {
        ...task.node.driver_internal_info,
        deploy_result: result,
        deploy_progress: undefined,
      },
    });
    await task.deps.agents.call(
      task.node.uuid,
      { name: "sync", args: {} },
      { signal: task.signal, timeoutMs: 120_000 },
    );
    const node = await task.driverNode();
    await task.hw.boot.prepareInstance(node);
    await task.hw.management.setBootDevice(
      node,
      { device: "disk", persistent: true },
      { signal: task.signal },
    );
    // one power cycle from the ramdisk into the instance
    await task.setPower("power off");
    await task.hw.boot.cleanUpRamdisk(node);
    await task.setPower("power on");
    await task.update({ deploy_step: {} });
    return DONE;
  };
}

/** Deploy through the agent: boot the ramdisk (unless fast track), stream the image, boot the disk. */
export function agentDeploy(sign: UrlSigner): Flow {
  const run = writeImage(sign);
  return {
    async start(task) {
      // validate before powering anything: a bad instance_info fails now, not after a boot
      writeRequestFromInstanceInfo(task.node.instance_info, {
        sign,
        rootDevice: task.node.properties.root_device,
        imageCa: task.deps.imageCa,
      });
      if (canFastTrack(task)) return run(task);
      await bootIntoRamdisk(task);
      return WAIT;
    },
    resume: run,
    async onFail(task) {
      await task.update({ deploy_step: {} }).catch(() => undefined);
      await powerOffQuietly(task);
    },
  };
}
