import { randomUUID } from "node:crypto";
import { z } from "zod";
import { HEALTH_STATES, POWER_STATES, PROVISION_STATES } from "./states.ts";

/** Free-form JSON objects (driver_info, properties, extra, ...). */
export const JsonObject = z.record(z.string(), z.unknown());
export type JsonObject = z.infer<typeof JsonObject>;

const nullableString = z.string().nullable();

/** A node as the conductor stores it: Ironic's field names, no links. */
export const NodeRecord = z.object({
  uuid: z.string(),
  name: nullableString,
  driver: z.string(),
  driver_info: JsonObject,
  driver_internal_info: JsonObject,
  properties: JsonObject,
  instance_info: JsonObject,
  instance_uuid: nullableString,
  allocation_uuid: nullableString,
  extra: JsonObject,
  provision_state: z.enum(PROVISION_STATES),
  target_provision_state: z.enum(PROVISION_STATES).nullable(),
  provision_updated_at: nullableString,
  power_state: z.enum(POWER_STATES).nullable(),
  target_power_state: z.string().nullable(),
  maintenance: z.boolean(),
  maintenance_reason: nullableString,
  fault: nullableString,
  last_error: nullableString,
  reservation: nullableString,
  conductor_group: z.string(),
  resource_class: nullableString,
  traits: z.array(z.string()),
  description: nullableString,
  owner: nullableString,
  lessee: nullableString,
  automated_clean: z.boolean().nullable(),
  protected: z.boolean(),
  protected_reason: nullableString,
  retired: z.boolean(),
  retired_reason: nullableString,
  console_enabled: z.boolean(),
  clean_step: JsonObject,
  deploy_step: JsonObject,
  /** 1.87: the service step running (or last planned); documents older than the field read as {} */
  service_step: JsonObject.default({}),
  raid_config: JsonObject,
  target_raid_config: JsonObject,
  network_data: JsonObject,
  boot_mode: nullableString,
  secure_boot: z.boolean().nullable(),
  chassis_uuid: nullableString,
  shard: nullableString,
  /** 1.83: the node this one is a part of (a DPU in a server); documents older than the field read as null */
  parent_node: nullableString.default(null),
  /**
   * 1.95: the node must never be powered off (reboots replace power-offs); null (a PATCH remove, as Ironic
   * stores it) means false, and documents older than the field read as false
   */
  disable_power_off: z.boolean().nullable().default(false),
  /** 1.104: the instance's name (Nova's display name); documents older than the field read as null */
  instance_name: z.string().min(1).max(255).nullable().default(null),
  /** 1.109: the BMC's health report, kept by the power sync; documents older than the field read as null */
  health: z.enum(HEALTH_STATES).nullable().default(null),
  inspection_started_at: nullableString,
  inspection_finished_at: nullableString,
  bios_interface: z.string(),
  boot_interface: z.string(),
  console_interface: z.string(),
  deploy_interface: z.string(),
  /** 1.86; documents older than the field read as "no-firmware", the only firmware interface */
  firmware_interface: z.string().default("no-firmware"),
  inspect_interface: z.string(),
  management_interface: z.string(),
  network_interface: z.string(),
  power_interface: z.string(),
  raid_interface: z.string(),
  rescue_interface: z.string(),
  storage_interface: z.string(),
  vendor_interface: z.string(),
  created_at: z.string(),
  updated_at: nullableString,
});
export type NodeRecord = z.infer<typeof NodeRecord>;

export const PortRecord = z.object({
  uuid: z.string(),
  address: z.string(),
  node_uuid: z.string(),
  portgroup_uuid: nullableString,
  pxe_enabled: z.boolean(),
  physical_network: nullableString,
  local_link_connection: JsonObject,
  internal_info: JsonObject,
  extra: JsonObject,
  is_smartnic: z.boolean(),
  name: nullableString,
  /** 1.97, 1.100, 1.101; absent from a port stored before them (read as null: see PORT_LATER_FIELDS) */
  description: nullableString.default(null),
  vendor: nullableString.default(null),
  category: nullableString.default(null),
  /** 1.111: offered to dynamic port groups (Ironic's default true; ports stored before it read as true) */
  available_for_dynamic_portgroup: z.boolean().default(true),
  created_at: z.string(),
  updated_at: nullableString,
});
export type PortRecord = z.infer<typeof PortRecord>;

/** Node fields added after nodes were first stored, as a document written before them reads (zod's defaults). */
/**
 * The fields a record schema fills with a default: exactly those added after its records were first stored,
 * so a document written before them lacks them. Derived from the schema, the one place they are declared.
 */
function laterFieldsOf(shape: Record<string, z.ZodType>): Readonly<Record<string, unknown>> {
  return Object.fromEntries(
    Object.entries(shape).flatMap(([key, field]) =>
      field instanceof z.ZodDefault ? [[key, field.def.defaultValue]] : [],
    ),
  );
}

export const NODE_LATER_FIELDS = laterFieldsOf(NodeRecord.shape);
export const PORT_LATER_FIELDS = laterFieldsOf(PortRecord.shape);

/** A stored record with the fields added after it was written set to their defaults (objects fresh). */
export function withLaterFields<T extends object>(record: T, later: Readonly<Record<string, unknown>>): T {
  const defaults = Object.entries(later).map(([key, value]) => [
    key,
    typeof value === "object" && value !== null ? structuredClone(value) : value,
  ]);
  return { ...Object.fromEntries(defaults), ...record };
}

/**
 * A new port with Ironic's defaults (PXE-enabled, in no group, no physical network, not a SmartNIC); the
 * fields given (undefined ones left out) override them. The one place a port's defaults live: the API's
 * create, inspection's new ports and the tests' fixtures all start here.
 */
export function newPortRecord(
  fields: Pick<PortRecord, "address" | "node_uuid"> & { [K in keyof PortRecord]?: PortRecord[K] | undefined },
): PortRecord {
  const given = Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
  return {
    uuid: randomUUID(),
    portgroup_uuid: null,
    pxe_enabled: true,
    physical_network: null,
    local_link_connection: {},
    internal_info: {},
    extra: {},
    is_smartnic: false,
    name: null,
    description: null,
    vendor: null,
    category: null,
    available_for_dynamic_portgroup: true,
    created_at: new Date().toISOString(),
    updated_at: null,
    ...(given as Partial<PortRecord>),
    address: fields.address,
    node_uuid: fields.node_uuid,
  };
}

/** A port group (Ironic's portgroup): a bond of the node's ports. */
export const PortgroupRecord = z.object({
  uuid: z.string(),
  name: nullableString,
  address: nullableString,
  node_uuid: z.string(),
  standalone_ports_supported: z.boolean(),
  internal_info: JsonObject,
  extra: JsonObject,
  mode: nullableString,
  properties: JsonObject,
  physical_network: nullableString.default(null),
  category: nullableString.default(null),
  /**
   * 1.111: made by trait-based networking (read-only; Ironic's default false). Anvil makes no group
   * dynamically, so it is false on every group; groups stored before it read as false.
   */
  dynamic_portgroup: z.boolean().default(false),
  created_at: z.string(),
  updated_at: nullableString,
});
export type PortgroupRecord = z.infer<typeof PortgroupRecord>;
export const PORTGROUP_LATER_FIELDS = laterFieldsOf(PortgroupRecord.shape);

export const ALLOCATION_STATES = ["allocating", "active", "error"] as const;

/** Beyond Ironic: a flavor-like request an allocation may carry. */
export const AllocationSpec = z
  .object({
    memory_mb: z.number().int().nonnegative().optional(),
    vcpus: z.number().int().nonnegative().optional(),
    local_gb: z.number().int().nonnegative().optional(),
    cpu_arch: z.string().optional(),
    capabilities: z.record(z.string(), z.string()).optional(),
    match: z.enum(["exact", "best_fit"]).default("best_fit"),
  })
  .strict();
export type AllocationSpec = z.infer<typeof AllocationSpec>;

export const AllocationRecord = z.object({
  uuid: z.string(),
  name: nullableString,
  state: z.enum(ALLOCATION_STATES),
  node_uuid: nullableString,
  resource_class: nullableString,
  traits: z.array(z.string()),
  candidate_nodes: z.array(z.string()),
  spec: AllocationSpec.nullable(),
  last_error: nullableString,
  extra: JsonObject,
  owner: nullableString,
  created_at: z.string(),
  updated_at: nullableString,
});
export type AllocationRecord = z.infer<typeof AllocationRecord>;

/** One running conductor process as the conductors table has it (one row per process, never reused). */
export const ConductorRecord = z.object({
  /** hostname + a random instance id: unique per process, the holder written into node reservations. */
  identity: z.string(),
  /** --name: what Ironic calls the conductor's hostname; at most one online row per hostname. */
  hostname: z.string(),
  conductor_group: z.string(),
  drivers: z.array(z.string()),
  /** Where other conductors reach its API (forwarding); null before it listens. */
  url: nullableString,
  /** The machine it runs on and its pid: a restart on the same machine can tell a crashed predecessor. */
  machine: z.string(),
  pid: z.number().int(),
  created_at: z.string(),
  /** Last heartbeat, milliseconds since the epoch. */
  heartbeat_at: z.number(),
  /** false once it stopped cleanly, or was found dead. */
  online: z.boolean(),
});
export type ConductorRecord = z.infer<typeof ConductorRecord>;
