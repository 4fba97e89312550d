import type { NodeRecord } from "../../shared/resources.ts";
import type { VirtualMediaInfo, VmediaDevice } from "../drivers/out-of-band.ts";
import { Invalid } from "../errors.ts";
import type { Task } from "../tasks/task.ts";
import { defineOperation, hardwareOf, underLock, type OperationContext } from "./operation.ts";

/** GET /v1/nodes/{id}/vmedia (1.93), under a shared lock as Ironic's get_virtual_media since its fix. */
export const GET_VMEDIA = defineOperation({
  purpose: "get virtual media devices",
  shared: true,
  onOwner: true,
});

/** POST /v1/nodes/{id}/vmedia (1.89): validated under the exclusive lock, inserted in the background. */
export const ATTACH_VMEDIA = defineOperation({
  purpose: "attaching virtual media",
  shared: false,
  onOwner: true,
});

/** DELETE /v1/nodes/{id}/vmedia (1.89): validated under the exclusive lock, ejected in the background. */
export const DETACH_VMEDIA = defineOperation({
  purpose: "detaching virtual media",
  shared: false,
  onOwner: true,
});

/** How the BMC gets the image (Ironic's image_download_source). */
export type VmediaSource = "http" | "local" | "swift";

export interface AttachRequest {
  device: VmediaDevice;
  url: string;
  source: VmediaSource;
}

// schemes the conductor cannot download: the BMC mounts them itself (Ironic's prepare_remote_image)
const SHARE_SCHEMES = new Set(["nfs:", "cifs:", "smb:"]);

type Extension = "get_virtual_media" | "attach_virtual_media" | "detach_virtual_media";

/** Ironic's UnsupportedDriverExtension (400) for a management interface without virtual media. */
function requireVmedia(ctx: OperationContext, node: NodeRecord, extension: Extension): void {
  const management = hardwareOf(ctx.drivers, node.driver).management;
  if (!management.getVirtualMedia || !management.attachVirtualMedia || !management.detachVirtualMedia)
    throw new Invalid(`Driver ${node.driver} does not support ${extension} (disabled or not implemented).`);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Python's repr of a device list, as Ironic's detach message prints it. */
function pyList(devices: readonly string[] | null): string {
  return devices === null ? "None" : `[${devices.map((d) => `'${d}'`).join(", ")}]`;
}

/**
 * Ironic's attach/detach shape: the management interface validated and last_error cleared under the exclusive
 * lock (the API then answers 204), the work done in the background still under it; its failure lands in
 * last_error as `<failure>: <reason>` and in the event stream.
 */
async function validatedThenInBackground(
  ctx: OperationContext,
  node: NodeRecord,
  options: {
    spec: typeof ATTACH_VMEDIA;
    action: "attach" | "detach";
    failure: (uuid: string) => string;
    work: (task: Task) => Promise<Record<string, string>>;
  },
): Promise<void> {
  const { action } = options;
  await underLock(ctx, node, {
    spec: options.spec,
    body: async (task, lock) => {
      task.hw.management.validate(await task.driverNode());
      await task.update({ last_error: null });
      lock.spawnAfter(async (t) => {
        const uuid = t.node.uuid;
        try {
          const fields = await options.work(t);
          ctx.deps.publish({ type: "vmedia", node: uuid, action, ...fields });
        } catch (error) {
          const message = `${options.failure(uuid)}: ${messageOf(error)}`;
          t.log.error(message);
          await t.update({ last_error: message });
          ctx.deps.publish({ type: "vmedia", node: uuid, action, error: message });
        }
      });
    },
  });
}

/** @throws Invalid (unknown driver, no virtual media), InvalidDriverInfo, DriverError, RedfishError */
export async function getVirtualMedia(ctx: OperationContext, node: NodeRecord): Promise<VirtualMediaInfo[]> {
  requireVmedia(ctx, node, "get_virtual_media");
  return underLock(ctx, node, {
    spec: GET_VMEDIA,
    body: async (task) => {
      const target = await task.driverNode();
      task.hw.management.validate(target);
      return (await task.hw.management.getVirtualMedia?.(target, { signal: task.signal })) ?? [];
    },
  });
}

/**
 * Ironic's attach_virtual_media: the management interface is validated and last_error cleared under the
 * exclusive lock (the API answers 204), then, still under it, a `local` image is downloaded and published and
 * the BMC told to insert it; a failure lands in last_error as Ironic words it.
 * @throws Invalid (unknown driver, no virtual media, a share URL with `local`), InvalidDriverInfo, NodeLocked
 */
export async function attachVirtualMedia(
  ctx: OperationContext,
  node: NodeRecord,
  request: AttachRequest,
): Promise<void> {
  requireVmedia(ctx, node, "attach_virtual_media");
  const url = new URL(request.url);
  // NOTE: Ironic finds this in its worker (then last_error); refused here, before the 204, with its words
  if (request.source === "local" && SHARE_SCHEMES.has(url.protocol))
    throw new Invalid(
      `image_download_source is set to 'local' but the image URL ${request.url} uses the ${url.protocol.slice(0, -1)} protocol which cannot be downloaded by the conductor. Set image_download_source to 'http' or remove it to use the default.`,
    );
  const images = ctx.deps.vmediaImages;
  if (request.source === "local" && !images)
    throw new Invalid("This conductor cannot serve virtual media images: use image_download_source 'http'");
  await validatedThenInBackground(ctx, node, {
    spec: ATTACH_VMEDIA,
    action: "attach",
    failure: (uuid) => `Could not attach device ${request.device} to node ${uuid}`,
    work: async (t) => {
      const uuid = t.node.uuid;
      try {
        // Ironic's `swift` serves a Glance image by a temporary URL; an http(s) URL goes to the BMC as is
        const served =
          request.source === "local" && images
            ? await images.publish({ node: uuid, device: request.device, url: request.url }, t.signal)
            : request.url;
        if (request.source !== "local") await images?.unpublish(uuid, [request.device]);
        await t.hw.management.attachVirtualMedia?.(
          await t.driverNode(),
          { device: request.device, url: served },
          { signal: t.signal },
        );
      } catch (error) {
        await images?.unpublish(uuid, [request.device]);
        throw error;
      }
      t.log.info({ device: request.device }, "virtual media attached");
      return { device: request.device };
    },
  });
}

/**
 * Ironic's detach_virtual_media: validated under the exclusive lock (204), the devices (all for null)
 * ejected in the background and their published copies dropped; a failure lands in last_error.
 * @throws Invalid (unknown driver, no virtual media), InvalidDriverInfo, NodeLocked
 */
export async function detachVirtualMedia(
  ctx: OperationContext,
  node: NodeRecord,
  devices: readonly VmediaDevice[] | null,
): Promise<void> {
  requireVmedia(ctx, node, "detach_virtual_media");
  await validatedThenInBackground(ctx, node, {
    spec: DETACH_VMEDIA,
    action: "detach",
    failure: (uuid) => `Could not detach device(s) ${pyList(devices)} from node ${uuid}`,
    work: async (t) => {
      await t.hw.management.detachVirtualMedia?.(await t.driverNode(), devices, { signal: t.signal });
      await ctx.deps.vmediaImages?.unpublish(t.node.uuid, devices);
      return {};
    },
  });
}
