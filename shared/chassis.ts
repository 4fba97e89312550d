import { z } from "zod";
import { JsonObject } from "./resources.ts";
import { UUID_PATTERN } from "./uuid.ts";

/** A chassis as the conductor stores it (Ironic's Chassis object): a group of nodes, nothing more. */
export const ChassisRecord = z.object({
  uuid: z.string(),
  description: z.string().max(255).nullable(),
  extra: JsonObject,
  created_at: z.string(),
  updated_at: z.string().nullable(),
});
export type ChassisRecord = z.infer<typeof ChassisRecord>;

/** POST /v1/chassis (Ironic's CHASSIS_SCHEMA). */
export const ChassisCreateBody = z
  .object({
    uuid: z.string().regex(UUID_PATTERN, "Expected a UUID").nullable().optional(),
    description: z.string().max(255).nullable().optional(),
    extra: JsonObject.nullable().optional(),
  })
  .strict();
export type ChassisCreateBody = z.infer<typeof ChassisCreateBody>;
