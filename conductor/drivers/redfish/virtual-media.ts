import { z } from "zod";
import { DriverError } from "../errors.ts";
import { RedfishError, type RedfishClient } from "./client.ts";
import { CollectionSchema } from "./schemas.ts";

const text = z.string().max(4096);
const link = z.looseObject({ "@odata.id": text });

/** What of a ComputerSystem leads to its virtual media: its own collection, else its managers'. */
const MediaOwnersSchema = z.looseObject({
  VirtualMedia: link.optional(),
  Links: z.looseObject({ ManagedBy: z.array(link).max(64).optional() }).optional(),
});
const ManagerSchema = z.looseObject({ VirtualMedia: link.optional() });

export const VirtualMediaSchema = z.looseObject({
  Id: text.optional(),
  MediaTypes: z.array(text).max(32).optional(),
  Image: text.nullable().optional(),
  Inserted: z.boolean().nullable().optional(),
  Actions: z
    .looseObject({
      "#VirtualMedia.InsertMedia": z.looseObject({ target: text }).optional(),
      "#VirtualMedia.EjectMedia": z.looseObject({ target: text }).optional(),
    })
    .optional(),
});
export type VirtualMedia = z.infer<typeof VirtualMediaSchema>;

/** A virtual CD/DVD slot: its path and what it holds. */
export interface CdSlot {
  path: string;
  media: VirtualMedia;
}

const isCd = (media: VirtualMedia): boolean =>
  (media.MediaTypes ?? []).some((t) => t === "CD" || t === "DVD");

/**
 * Every virtual media slot of the system: its own VirtualMedia collection when it has one (Redfish 2021.1+),
 * else its managers' (Ironic's _get_vmedia order). @throws RedfishError
 */
export async function listSlots(
  client: RedfishClient,
  systemPath: string,
  signal?: AbortSignal,
): Promise<CdSlot[]> {
  const system = await client.get(systemPath, MediaOwnersSchema, signal);
  const collections: string[] = [];
  if (system.VirtualMedia) collections.push(system.VirtualMedia["@odata.id"]);
  else
    for (const manager of system.Links?.ManagedBy ?? []) {
      const found = await client.get(manager["@odata.id"], ManagerSchema, signal);
      if (found.VirtualMedia) collections.push(found.VirtualMedia["@odata.id"]);
    }
  const slots: CdSlot[] = [];
  for (const collection of collections) {
    for (const member of (await client.get(collection, CollectionSchema, signal)).Members) {
      const path = member["@odata.id"];
      slots.push({ path, media: await client.get(path, VirtualMediaSchema, signal) });
    }
  }
  return slots;
}

/**
 * Whether a slot takes `mediaType` (Redfish's CD, Floppy or USBStick); a DVD slot takes a CD, as Ironic
 * lets it for the BMCs that offer only DVD (Cisco UCS).
 */
export function takesMedia(slot: CdSlot, mediaType: string): boolean {
  const types = slot.media.MediaTypes ?? [];
  return types.includes(mediaType) || (mediaType === "CD" && types.includes("DVD"));
}

/**
 * The system's virtual CD: a member with MediaTypes CD or DVD of the system's own VirtualMedia collection
 * (Redfish 2021.1+), else of its managers' (as Ironic looks: systems first, then managers). Null when none.
 * @throws RedfishError
 */
export async function findCdSlot(
  client: RedfishClient,
  systemPath: string,
  signal?: AbortSignal,
): Promise<CdSlot | null> {
  const system = await client.get(systemPath, MediaOwnersSchema, signal);
  const collections: string[] = [];
  if (system.VirtualMedia) collections.push(system.VirtualMedia["@odata.id"]);
  for (const manager of system.Links?.ManagedBy ?? []) {
    const found = await client.get(manager["@odata.id"], ManagerSchema, signal);
    if (found.VirtualMedia) collections.push(found.VirtualMedia["@odata.id"]);
  }
  for (const collection of collections) {
    const members = (await client.get(collection, CollectionSchema, signal)).Members;
    for (const member of members) {
      const path = member["@odata.id"];
      const media = await client.get(path, VirtualMediaSchema, signal);
      if (isCd(media)) return { path, media };
    }
  }
  return null;
}

function actionTarget(slot: CdSlot, action: "InsertMedia" | "EjectMedia"): string {
  return (
    slot.media.Actions?.[`#VirtualMedia.${action}`]?.target ?? `${slot.path}/Actions/VirtualMedia.${action}`
  );
}

/** True when the slot holds something (an image named or marked inserted). */
export function holdsMedia(slot: CdSlot): boolean {
  return slot.media.Inserted === true || (slot.media.Image ?? "") !== "";
}

/** VirtualMedia.EjectMedia, only when something is in the slot. @throws RedfishError */
export async function ejectCd(client: RedfishClient, slot: CdSlot, signal?: AbortSignal): Promise<boolean> {
  if (!holdsMedia(slot)) return false;
  await client.request({ method: "POST", path: actionTarget(slot, "EjectMedia"), body: {}, signal });
  return true;
}

/** Drops the query (a signed link's signature) from a URL for a message. */
export function withoutQuery(url: string): string {
  const at = url.indexOf("?");
  return at < 0 ? url : `${url.slice(0, at)}?…`;
}

/**
 * VirtualMedia.InsertMedia with the image URL, inserted and write-protected.
 * @throws DriverError in Ironic's words ("Virtual media mount failed for node …")
 */
export async function insertCd(
  client: RedfishClient,
  request: { node: string; slot: CdSlot; image: string },
  signal?: AbortSignal,
): Promise<void> {
  try {
    await client.request({
      method: "POST",
      path: actionTarget(request.slot, "InsertMedia"),
      body: { Image: request.image, Inserted: true, WriteProtected: true },
      signal,
    });
  } catch (error) {
    if (!(error instanceof RedfishError)) throw error;
    throw new DriverError(
      `Virtual media mount failed for node ${request.node} with image ${withoutQuery(request.image)}. Error: ${error.detail || error.message}`,
    );
  }
}
