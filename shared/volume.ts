import { z } from "zod";
import { JsonObject } from "./resources.ts";
import { UUID_PATTERN } from "./uuid.ts";

const UUID = z.string().regex(UUID_PATTERN, "Expected a UUID");

/** A node's storage initiator (Ironic's VolumeConnector): an iSCSI IQN, a WWPN, a MAC, ... */
export const VolumeConnectorRecord = z.object({
  uuid: z.string(),
  node_uuid: z.string(),
  type: z.string().min(1).max(32),
  connector_id: z.string().min(1).max(255),
  extra: JsonObject,
  created_at: z.string(),
  updated_at: z.string().nullable(),
});
export type VolumeConnectorRecord = z.infer<typeof VolumeConnectorRecord>;

/** Ironic stores boot_index as a 32-bit integer; 0 is the boot volume. */
const BootIndex = z
  .number()
  .int()
  .min(0)
  .max(2 ** 31 - 1);

/** A volume a node may attach or boot from (Ironic's VolumeTarget); boot_index 0 is the boot volume. */
export const VolumeTargetRecord = z.object({
  uuid: z.string(),
  node_uuid: z.string(),
  volume_type: z.string().min(1).max(64),
  volume_id: z.string().min(1).max(36),
  boot_index: BootIndex,
  properties: JsonObject,
  extra: JsonObject,
  created_at: z.string(),
  updated_at: z.string().nullable(),
});
export type VolumeTargetRecord = z.infer<typeof VolumeTargetRecord>;

/** POST /v1/volume/connectors (Ironic's CONNECTOR_SCHEMA). */
export const VolumeConnectorCreateBody = z
  .object({
    uuid: UUID.nullable().optional(),
    node_uuid: UUID,
    type: z.string().min(1).max(32),
    connector_id: z.string().min(1).max(255),
    extra: JsonObject.nullable().optional(),
  })
  .strict();
export type VolumeConnectorCreateBody = z.infer<typeof VolumeConnectorCreateBody>;

/** POST /v1/volume/targets (Ironic's TARGET_SCHEMA). */
export const VolumeTargetCreateBody = z
  .object({
    uuid: UUID.nullable().optional(),
    node_uuid: UUID,
    volume_type: z.string().min(1).max(64),
    volume_id: z.string().min(1).max(36),
    boot_index: BootIndex,
    properties: JsonObject.nullable().optional(),
    extra: JsonObject.nullable().optional(),
  })
  .strict();
export type VolumeTargetCreateBody = z.infer<typeof VolumeTargetCreateBody>;
