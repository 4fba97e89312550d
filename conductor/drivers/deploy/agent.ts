import { collectRamdiskLogs, succeededReason } from "../ramdisk-logs.ts";
import { Invalid } from "../../errors.ts";
import type { z } from "zod";
import { AGENT_STEPS, type InstallBootloaderStepArgs } from "../../../shared/agent-steps.ts";
import type { CommandArgs } from "../../../shared/protocol.ts";
import { parseStrictBool } from "../../../shared/strict-bool.ts";
import { EraseOptionsSchema, eraseDevicesArgs, eraseMetadataArgs } from "../../../shared/erase.ts";
import { writeRequestFromInstanceInfo } from "../../images/image-request.ts";
import { noGlance } from "../../images/glance-source.ts";
import { prepareInstanceBoot } from "../boot/instance-boot.ts";
import type { DriverTask as Task } from "../task-context.ts";
import { agentCommand } from "../agent-command.ts";
import { retireAgentToken } from "../agent-token.ts";
import { commandSettled, inFlightFor } from "../in-flight-command.ts";
import { CheckpointSchema, type Checkpoint } from "../../../shared/image.ts";
import {
  RESUME_KEY,
  checkpointFor,
  imageIdentity,
  rebootedBoot,
  rebootForResume,
  resumesSoFar,
  saveCheckpoint,
  startRecord,
  waitForAgent,
} from "./write-resume.ts";
import { burninRun } from "./burnin.ts";
import type { DeployInterface } from "../interfaces.ts";
import { NoArgs, agentStep, defineStep, type AgentStepRun, type StepArgs } from "../step.ts";

/** How often deploy progress is written to the node (the event stream gets every frame). */
const PROGRESS_WRITE_MS = 1000;

/**
 * Runs the agent's erase_devices and keeps its per-disk results (method, verified, bytes, seconds) in
 * driver_internal_info.erase_devices_result, where an operator can see how each disk was erased.
 */
async function eraseAndRecord(task: Task, args: unknown): Promise<void> {
  const result = await agentCommand(task, { name: "erase_devices", args: EraseOptionsSchema.parse(args) });
  await task.mergeInternalInfo({ erase_devices_result: result });
}

/** The metadata erase, its per-disk results kept as erase_devices_metadata_result (which disks, or why not). */
async function eraseMetadataAndRecord(task: Task): Promise<void> {
  const result = await agentCommand(task, {
    name: "erase_devices_metadata",
    args: eraseMetadataArgs(task.node),
  });
  await task.mergeInternalInfo({ erase_devices_metadata_result: result });
}

async function writeImage(task: Task): Promise<void> {
  const { images, deploy } = task.deps.config;
  // a Glance image becomes a temporary URL here (a Swift temp URL, or the conductor's cache behind a signed
  // link, held in the cache until the agent has written it)
  const source = await (task.deps.imageSources ?? noGlance).resolve(task.node, task.signal);
  try {
    const request = {
      ...writeRequestFromInstanceInfo(source.instanceInfo, {
        sign: task.deps.sign,
        rootDevice: task.node.properties.root_device,
        imageCa: task.deps.imageCa,
      }),
      limits: {
        min_bytes_per_second: images.downloadMinBytesPerSecond,
        rate_window_s: images.downloadRateWindowS,
      },
      ...swarmArgs(task),
      checkpoint_bytes: deploy.resumeCheckpointBytes,
    };
    const identity = imageIdentity(request.image);
    // a conductor taking the step over asks the agent for the same write_image and keeps its checkpoints
    const marker = task.runningStep;
    const takenOver = marker !== undefined && inFlightFor(task.node, marker)?.ids.write_image !== undefined;
    if (!takenOver || checkpointFor(task, identity) === undefined)
      await startRecord(task, identity, request.image.size);
    // a reboot of the node mid-write is resumed from its last durable checkpoint, a bounded number of times
    let result: unknown;
    for (let resumes = takenOver ? resumesSoFar(task, identity) : 0; ; resumes++) {
      const resume = checkpointFor(task, identity);
      const saved = { last: Promise.resolve() };
      try {
        result = await sendWriteImage(task, {
          request: { ...request, ...(resume ? { resume } : {}) },
          onCheckpoint: (checkpoint) => {
            saved.last = saved.last
              .then(() => saveCheckpoint(task, identity, checkpoint))
              .catch(() => undefined);
          },
          // a new agent process of the same boot (its token kept) gets the command again: from the checkpoint
          resendArgs: () => {
            const latest = checkpointFor(task, identity);
            return { ...request, ...(latest ? { resume: latest } : {}) };
          },
        });
        break;
      } catch (error) {
        const bootId = rebootedBoot(error);
        if (bootId === null) throw error;
        await saved.last;
        if (resumes >= deploy.maxResumes) {
          throw new Error(
            `the node booted again ${resumes + 1} times while write_image ran (at most ${deploy.maxResumes} are resumed); the image was not written`,
          );
        }
        await rebootForResume(task, identity, { bootId, resumes: resumes + 1 });
        // the next write_image is a new command (a fresh id), sent to the next boot's agent
        await commandSettled(task, "write_image");
        await waitForAgent(task);
      }
    }
    await task.mergeInternalInfo({
      deploy_result: result,
      deploy_progress: undefined,
      [RESUME_KEY]: undefined,
    });
    const swarm = (result as { swarm?: unknown } | null)?.swarm;
    if (swarm !== undefined) task.deps.publish({ type: "swarm.deploy", node: task.node.uuid, swarm });
  } finally {
    source.release();
  }
}

/** One write_image command: progress kept once a second, each durable checkpoint handed to `onCheckpoint`. */
async function sendWriteImage(
  task: Task,
  command: {
    request: CommandArgs<"write_image">;
    onCheckpoint: (checkpoint: Checkpoint) => void;
    resendArgs: () => CommandArgs<"write_image">;
  },
): Promise<unknown> {
  const { request, onCheckpoint, resendArgs } = command;
  let lastWrite = 0;
  return agentCommand(
    task,
    { name: "write_image", args: request },
    {
      resendArgs,
      onProgress: (progress) => {
        const checkpoint = CheckpointSchema.safeParse((progress as { checkpoint?: unknown }).checkpoint);
        if (checkpoint.success) onCheckpoint(checkpoint.data);
        const now = Date.now();
        if (now - lastWrite < PROGRESS_WRITE_MS) return;
        lastWrite = now;
        // one key written in place: once a second during a write, rewriting the whole node would be the cost
        task.mergeInternalInfo({ deploy_progress: progress }).catch(() => undefined);
      },
    },
  );
}

/**
 * write_image's `swarm` argument when the conductor runs swarm deploys (deploy.swarm) and the node has not
 * opted out (driver_info.swarm false); the agent's figures come back in deploy_result.swarm.
 */
function swarmArgs(task: Task): { swarm?: CommandArgs<"write_image">["swarm"] } {
  const deploy = task.deps.config.deploy;
  if (!deploy.swarm) return {};
  const optOut = parseStrictBool(task.node.driver_info.swarm);
  if (optOut === false) return {};
  return {
    swarm: {
      window: deploy.swarmWindow,
      peer_stall_s: deploy.swarmPeerStallS,
      cache_bytes: deploy.swarmCacheBytes,
      linger_s: deploy.swarmLingerS,
      max_uploads: deploy.swarmMaxUploads,
      peer_tls: deploy.swarmPeerTls,
      ask_timeout_s: deploy.swarmAssigneeWaitS * 2,
    },
  };
}

/**
 * Whether the image's own grub-install runs (instance_info.image_bootloader), which the conductor's
 * images.allow_image_bootloader must allow. @throws Invalid when asked for and not allowed
 */
function imageBootloaderAsked(task: Task): boolean {
  const asked = task.node.instance_info.image_bootloader;
  if (asked !== true && asked !== "true" && asked !== "True") return false;
  if (!task.deps.config.images.allowImageBootloader) {
    throw new Invalid(
      "instance_info.image_bootloader runs the image's own grub-install in the ramdisk, which this conductor does not allow (images.allow_image_bootloader)",
    );
  }
  return true;
}

async function installBootloader(task: Task, args: StepArgs): Promise<void> {
  // parsed by the catalogue's schema when the step was requested
  const { boot_mode: asked, force } = args as z.infer<typeof InstallBootloaderStepArgs>;
  // As Ironic: a whole-disk image brings its own bootloader, so GRUB is installed only for a partition
  // image or onto software RAID (where every member needs one), unless the step is forced.
  if (!force && !needsBootloader(task.node)) return;
  const hints = task.node.properties.root_device;
  const bootMode =
    asked ??
    (task.node.boot_mode === "bios" || task.node.boot_mode === "uefi" ? task.node.boot_mode : undefined);
  // Ironic's instance_info image_rootfs_uuid names the root filesystem of a whole-disk image on software
  // RAID; without it the agent takes the first Linux filesystem (Ironic's "first partition" fallback).
  const rootUuid = task.node.instance_info.image_rootfs_uuid;
  await agentCommand(task, {
    name: "install_bootloader",
    args: {
      ...(hints && typeof hints === "object" ? { root_device: hints } : {}),
      ...(bootMode ? { boot_mode: bootMode } : {}),
      ...(typeof rootUuid === "string" && rootUuid !== "" ? { root_uuid: rootUuid } : {}),
      ...(imageBootloaderAsked(task) ? { image_bootloader: true } : {}),
    } as CommandArgs<"install_bootloader">,
  });
}

/**
 * The conductor's side of the agent's deploy-interface steps; a catalogue step missing here sends its command
 * with its arguments as they are (agentStep's default).
 */
const RUNS: Readonly<Record<string, AgentStepRun>> = {
  // the conductor's erase settings (Ironic's [deploy] options) and the node's skip_block_devices
  erase_devices: (task) => eraseAndRecord(task, eraseDevicesArgs(task.deps.config.erase, task.node)),
  erase_devices_metadata: eraseMetadataAndRecord,
  /** IPA's express erase: the agent uses the fast, hardware-assisted methods only (discard, secure erase). */
  erase_devices_express: (task) =>
    eraseAndRecord(task, eraseDevicesArgs(task.deps.config.erase, task.node, { express: true })),
  write_image: writeImage,
  install_bootloader: installBootloader,
  burnin_cpu: burninRun("burnin_cpu"),
  burnin_memory: burninRun("burnin_memory"),
  burnin_disk: burninRun("burnin_disk"),
  burnin_network: burninRun("burnin_network"),
};

/** Whether a deploy needs GRUB installed: a partition image, or a root on software RAID. */
export function needsBootloader(node: {
  instance_info: Record<string, unknown>;
  raid_config: Record<string, unknown>;
}): boolean {
  if (node.instance_info.image_type === "partition") return true;
  const disks = node.raid_config.logical_disks;
  return (
    Array.isArray(disks) &&
    disks.some(
      (d) => typeof d === "object" && d !== null && (d as { controller?: unknown }).controller === "software",
    )
  );
}

/** One BMC power cycle from the ramdisk into the written disk (sync first: the image must be on disk). */
const bootInstance = defineStep({
  kind: "deploy",
  interface: "deploy",
  step: "boot_instance",
  priority: 20,
  requiresRamdisk: true,
  args: NoArgs,
  async run(task) {
    await task.deps.agents.call(
      task.node.uuid,
      { name: "sync", args: {} },
      { signal: task.signal, timeoutMs: 120_000 },
    );
    // Ironic's reboot_and_finish_deploy: with deploy_logs_collect `always`, the logs of a deploy that worked
    await collectRamdiskLogs(task, succeededReason("deploying"), "success");
    await prepareInstanceBoot(task);
    const node = await task.driverNode();
    await task.hw.management.setBootDevice(
      node,
      { device: "disk", persistent: true },
      { signal: task.signal },
    );
    // a node with disable_power_off (1.95) is never off: one reboot from the ramdisk into the disk instead
    // (Ironic's tear_down_agent and boot_instance)
    const keepPower = task.node.disable_power_off === true;
    // as Ironic's power action wipes agent_secret_token: no agent of this boot may come back after it
    await retireAgentToken(task);
    if (!keepPower) await task.setPower("power off");
    await task.hw.boot.cleanUpRamdisk(node);
    await task.setPower(keepPower ? "reboot" : "power on");
    // the ramdisk's boot is over: a fast-track rebuild right after must not find its agent's session alive
    task.deps.agents.retire?.(task.node.uuid);
  },
});

/** Ironic's `direct` deploy: the agent in the deploy ramdisk streams the image and erases disks. */
export const agentDeploy: DeployInterface = {
  name: "direct",
  inBand: true,
  steps: [
    ...AGENT_STEPS.filter((s) => s.interface === "deploy").map((s) =>
      agentStep(s, Object.hasOwn(RUNS, s.step) ? { run: RUNS[s.step] } : {}),
    ),
    bootInstance,
  ],
};
