import type { Task } from "../tasks/task.ts";
import { beginSteps, resumeSteps, withoutBookkeeping } from "./step-runner.ts";
import type { Flow } from "./flow.ts";
import { writeRequestFromInstanceInfo } from "../images/image-request.ts";
import { glanceImageId } from "../images/glance.ts";
import { noGlance } from "../images/glance-source.ts";
import { powerOffQuietly } from "./ramdisk.ts";

/**
 * Deploying through the step runner: the deploy interface's steps (the agent's write_image, boot_instance…)
 * with the operator's deploy_steps merged in.
 */
export const deploy: Flow = {
  async start(task: Task) {
    if (task.interfaces.deploy.inBand) {
      // validate before powering anything: a bad instance_info fails now, not after a boot. A Glance image is
      // checked as Ironic's validate does (exists, active, the node's project may use it); its temporary URL
      // is made when the image is written (write_image), so only its other fields are checked here.
      const source = task.node.instance_info.image_source;
      const glance = typeof source === "string" && glanceImageId(source) !== null;
      if (glance) await (task.deps.imageSources ?? noGlance).check(task.node, task.signal);
      const instanceInfo = glance
        ? { ...task.node.instance_info, image_source: "http://glance-image.invalid/" }
        : task.node.instance_info;
      writeRequestFromInstanceInfo(instanceInfo, {
        sign: task.deps.sign,
        rootDevice: task.node.properties.root_device,
        imageCa: task.deps.imageCa,
      });
    }
    return beginSteps(task, "deploy");
  },
  resume: (task) => resumeSteps(task, "deploy"),
  async onFail(task) {
    await task
      .update({
        deploy_step: {},
        driver_internal_info: withoutBookkeeping(task.node.driver_internal_info, "deploy"),
      })
      .catch(() => undefined);
    if (task.interfaces.deploy.inBand) await powerOffQuietly(task);
  },
};
