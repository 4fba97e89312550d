import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { snapshotOf } from "../../../shared/history.ts";
import { CheckpointSchema, imageObjectUrl, type Checkpoint, type ImageSpec } from "../../../shared/image.ts";
import { historyRecord } from "../../history/recorder.ts";
import { retireAgentToken } from "../agent-token.ts";
import { awaitsCommand } from "../in-flight-command.ts";
import type { DriverTask as Task } from "../task-context.ts";

/**
 * driver_internal_info key of a write_image's last durable checkpoint: which image (its URL without the
 * query, whose signature changes with every temporary URL, and its checksum), how many of its first bytes are
 * on the disk with their digest, and how many times the write was resumed.
 */
export const RESUME_KEY = "deploy_resume";

const ResumeRecordSchema = z.object({
  image: z.string(),
  checksum: z.string().nullable(),
  size: z.number().int().nonnegative().nullable(),
  checkpoint: CheckpointSchema.nullable(),
  resumes: z.number().int().nonnegative(),
});
type ResumeRecord = z.infer<typeof ResumeRecordSchema>;

/** What names an image across temporary URLs: the URL without its query, and its checksum. */
export interface ImageIdentity {
  image: string;
  checksum: string | null;
}

export function imageIdentity(image: Pick<ImageSpec, "url" | "checksum">): ImageIdentity {
  const spec = image.checksum;
  const checksum =
    spec === undefined
      ? null
      : "url" in spec
        ? `file:${imageObjectUrl(spec.url)}`
        : `${spec.algo}:${spec.value.toLowerCase()}`;
  return { image: imageObjectUrl(image.url), checksum };
}

function recordOf(task: Pick<Task, "node">, identity: ImageIdentity): ResumeRecord | null {
  const parsed = ResumeRecordSchema.safeParse(task.node.driver_internal_info[RESUME_KEY]);
  if (!parsed.success) return null;
  const record = parsed.data;
  return record.image === identity.image && record.checksum === identity.checksum ? record : null;
}

/** The checkpoint this node's disk holds for the image, if the write of that very image reported one. */
export function checkpointFor(task: Pick<Task, "node">, identity: ImageIdentity): Checkpoint | undefined {
  return recordOf(task, identity)?.checkpoint ?? undefined;
}

/** Starts the image's record afresh (a new write_image step: nothing is resumed across deploys). */
export async function startRecord(
  task: Task,
  identity: ImageIdentity,
  size: number | undefined,
): Promise<void> {
  const record: ResumeRecord = { ...identity, size: size ?? null, checkpoint: null, resumes: 0 };
  await task.mergeInternalInfo({ [RESUME_KEY]: record });
}

/** Keeps a checkpoint the agent reported (after its fsync) for the image being written. */
export async function saveCheckpoint(
  task: Task,
  identity: ImageIdentity,
  checkpoint: Checkpoint,
): Promise<void> {
  const record = recordOf(task, identity);
  if (record === null) return;
  if (record.checkpoint !== null && record.checkpoint.bytes >= checkpoint.bytes) return;
  await task.mergeInternalInfo({ [RESUME_KEY]: { ...record, checkpoint } });
}

/** Forgets the record: the image is written (or the step gave up). */
export async function dropRecord(task: Task): Promise<void> {
  await task.mergeInternalInfo({ [RESUME_KEY]: undefined });
}

/** The boot id an AGENT_REBOOTED failure names, or null when the failure is something else. */
export function rebootedBoot(error: unknown): string | null {
  if (typeof error !== "object" || error === null) return null;
  if ((error as { code?: unknown }).code !== "AGENT_REBOOTED") return null;
  const bootId = (error as { bootId?: unknown }).bootId;
  return typeof bootId === "string" ? bootId : "";
}

/**
 * The node booted again under its agent while write_image ran: records it (history and event), ends the lost
 * boot's token, the new boot's too (`bootId`, which dialled in without one and proves nothing), and boots the
 * ramdisk again from the BMC, under the lock this step holds. The agent of that boot is issued a fresh token,
 * as after any boot the conductor made. Ironic would have waited for the step's timeout.
 * @throws as the power and management interfaces
 */
export async function rebootForResume(
  task: Task,
  identity: ImageIdentity,
  lost: { bootId: string; resumes: number },
): Promise<void> {
  const record = recordOf(task, identity);
  const kept = record?.checkpoint?.bytes ?? 0;
  const resumes = lost.resumes;
  await task.mergeInternalInfo({
    [RESUME_KEY]: { ...(record ?? { ...identity, size: null, checkpoint: null }), resumes },
  });
  const event =
    `the node booted again while write_image ran (resume ${resumes} of at most ${task.deps.config.deploy.maxResumes}): ` +
    `booting the ramdisk again to continue from ${kept} durable bytes`;
  task.log.warn({ boot_id: lost.bootId, resumes, kept_bytes: kept }, event);
  task.deps.publish({ type: "deploy.resume", node: task.node.uuid, resumes, kept_bytes: kept });
  const at = new Date();
  const entry = {
    node: task.node.uuid,
    event,
    eventType: "deploy",
    severity: "WARNING" as const,
    changes: { [RESUME_KEY]: { resumes, kept_bytes: kept } },
    snapshot: snapshotOf(task.node),
  };
  await task.deps.store.addNodeHistory(historyRecord(entry, task.deps.holder, at));
  await retireAgentToken(task, { bootId: lost.bootId || undefined });
  const node = await task.driverNode();
  const device = task.hw.boot.ramdiskBootDevice?.(node) ?? "pxe";
  await task.hw.management.setBootDevice(node, { device, persistent: false }, { signal: task.signal });
  await task.setPower("reboot");
  task.deps.agents.retire?.(task.node.uuid);
}

/** How many times the write of this image was resumed so far (a conductor taking the step over goes on counting). */
export function resumesSoFar(task: Pick<Task, "node">, identity: ImageIdentity): number {
  return recordOf(task, identity)?.resumes ?? 0;
}

/**
 * A write_image handed back to its agent (a restart or a takeover left the node in `wait call-back`, the
 * command in flight, no conductor waiting on it), whose node then booted again: no AGENT_REBOOTED reaches a
 * step, so without this the node waited for a call-back that never comes until the deploy timeout. Under the
 * node's lock: boots the ramdisk again as rebootForResume does, and the call-back of that boot runs the step
 * again, which sends write_image with the checkpoint. "exhausted": the resumes allowed are used up.
 */
export async function resumeHandedBackWrite(
  task: Task,
  bootId: string,
): Promise<"rebooted" | "exhausted" | "not handed back"> {
  const parsed = ResumeRecordSchema.safeParse(task.node.driver_internal_info[RESUME_KEY]);
  if (
    task.node.provision_state !== "wait call-back" ||
    !parsed.success ||
    !awaitsCommand(task.node, "write_image")
  )
    return "not handed back";
  const { image, checksum, resumes } = parsed.data;
  if (resumes >= task.deps.config.deploy.maxResumes) return "exhausted";
  await rebootForResume(task, { image, checksum }, { bootId, resumes: resumes + 1 });
  return "rebooted";
}

/** Waits, within the step's time (its signal), for the agent of the ramdisk's next boot to dial in. */
export async function waitForAgent(task: Task): Promise<void> {
  while (!task.deps.agents.isConnected(task.node.uuid)) {
    await sleep(200, undefined, { signal: task.signal });
  }
}
