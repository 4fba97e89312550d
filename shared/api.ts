import { z } from "zod";
import { AllocationSpec, JsonObject } from "./resources.ts";
import { BOOT_DEVICES, POWER_TARGETS, PROVISION_VERBS } from "./states.ts";
import { STEP_KINDS } from "./steps.ts";
import { StrictBool } from "./strict-bool.ts";
import { UUID_PATTERN } from "./uuid.ts";

/**
 * Every boolean the API reads (body fields, patched fields, query parameters): Ironic's strict reading, so
 * the value stored is always the value the policy check saw.
 */
export const Booleanish = StrictBool;

/** A UUID field: a bad value is answered with Ironic's args.uuid text, "Expected UUID for <field>: <value>". */
export const UUID = z.string().superRefine((value, ctx) => {
  // NOTE: the value travels as the message; the API's error mapper writes Ironic's sentence around it
  if (!UUID_PATTERN.test(value))
    ctx.addIssue({ code: "custom", message: value, params: { expected: "UUID" } });
});
/** Ironic names: host-name-like, no spaces, not a UUID. */
export const ResourceName = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[A-Za-z0-9\-._~]+$/, "Names may contain only letters, digits and -._~");
export const Trait = z
  .string()
  .min(1)
  .max(255)
  .regex(/^(CUSTOM_[A-Z0-9_]+|[A-Z][A-Z0-9_]*)$/, "Traits are upper-case standard traits or CUSTOM_ names");

const interfaceField = z.string().min(1).max(255).optional();

export const NodeCreateBody = z
  .object({
    uuid: UUID.optional(),
    name: ResourceName.nullable().optional(),
    driver: z.string().min(1).max(255),
    driver_info: JsonObject.optional(),
    properties: JsonObject.optional(),
    instance_info: JsonObject.optional(),
    extra: JsonObject.optional(),
    resource_class: z.string().max(80).nullable().optional(),
    conductor_group: z
      .string()
      .max(255)
      .regex(/^[A-Za-z0-9_.-]*$/)
      .optional(),
    chassis_uuid: UUID.nullable().optional(),
    description: z.string().max(4096).nullable().optional(),
    owner: z.string().max(255).nullable().optional(),
    lessee: z.string().max(255).nullable().optional(),
    automated_clean: Booleanish.nullable().optional(),
    protected: Booleanish.optional(),
    protected_reason: z.string().max(255).nullable().optional(),
    retired: Booleanish.optional(),
    retired_reason: z.string().max(255).nullable().optional(),
    network_data: JsonObject.optional(),
    boot_mode: z.enum(["uefi", "bios"]).nullable().optional(),
    shard: z.string().max(255).nullable().optional(),
    parent_node: z.string().max(36).nullable().optional(),
    disable_power_off: Booleanish.nullable().optional(),
    /** 1.104; Ironic's node schema: 1 to 255 characters */
    instance_name: z.string().min(1).max(255).nullable().optional(),
    bios_interface: interfaceField,
    boot_interface: interfaceField,
    console_interface: interfaceField,
    deploy_interface: interfaceField,
    firmware_interface: interfaceField,
    inspect_interface: interfaceField,
    management_interface: interfaceField,
    network_interface: interfaceField,
    power_interface: interfaceField,
    raid_interface: interfaceField,
    rescue_interface: interfaceField,
    storage_interface: interfaceField,
    vendor_interface: interfaceField,
  })
  .strict();
export type NodeCreateBody = z.infer<typeof NodeCreateBody>;

export const PortCreateBody = z
  .object({
    uuid: UUID.optional(),
    address: z.string().min(1).max(64),
    /** One of node_uuid and (1.94) node_ident, the node's uuid or name: Ironic's PORT_SCHEMA oneOf. */
    node_uuid: UUID.optional(),
    node_ident: z.string().min(1).max(255).optional(),
    portgroup_uuid: UUID.nullable().optional(),
    pxe_enabled: Booleanish.optional(),
    physical_network: z.string().max(64).nullable().optional(),
    local_link_connection: JsonObject.optional(),
    extra: JsonObject.optional(),
    is_smartnic: Booleanish.optional(),
    /** 1.88; Ironic's PORT_SCHEMA: any string (the database holds 255) */
    name: z.string().max(255).nullable().optional(),
    /** 1.97, 1.100, 1.101: Ironic's PORT_SCHEMA lengths */
    description: z.string().max(255).nullable().optional(),
    vendor: z.string().max(32).nullable().optional(),
    category: z.string().max(80).nullable().optional(),
    /** 1.111: Ironic's PORT_SCHEMA `{'type': 'boolean'}`, a JSON boolean only */
    available_for_dynamic_portgroup: z.boolean().optional(),
  })
  .strict();
export type PortCreateBody = z.infer<typeof PortCreateBody>;

/** POST /v1/nodes/{id}/vifs: the VIF's id (Neutron's port), optionally the port or port group to use (1.67). */
export const VifAttachBody = z
  .object({
    id: z.string().min(1).max(255),
    port_uuid: UUID.optional(),
    portgroup_uuid: UUID.optional(),
  })
  .loose();
export type VifAttachBody = z.infer<typeof VifAttachBody>;

/** Ironic's PORTGROUP_SCHEMA (physical_network 1.102, category 1.103: accepted at any version, as Ironic). */
export const PortgroupCreateBody = z
  .object({
    uuid: UUID.nullable().optional(),
    address: z.string().max(64).nullable().optional(),
    node_uuid: UUID,
    name: z.string().max(255).nullable().optional(),
    standalone_ports_supported: Booleanish.nullable().optional(),
    extra: JsonObject.nullable().optional(),
    mode: z.string().max(255).nullable().optional(),
    properties: JsonObject.nullable().optional(),
    physical_network: z.string().max(64).nullable().optional(),
    category: z.string().max(80).nullable().optional(),
  })
  .strict();
export type PortgroupCreateBody = z.infer<typeof PortgroupCreateBody>;

export const AllocationCreateBody = z
  .object({
    uuid: UUID.optional(),
    name: ResourceName.nullable().optional(),
    resource_class: z.string().min(1).max(80).nullable().optional(),
    traits: z.array(Trait).max(50).optional(),
    candidate_nodes: z.array(z.string().min(1).max(255)).optional(),
    extra: JsonObject.optional(),
    owner: z.string().max(255).nullable().optional(),
    node: z.string().min(1).max(255).optional(),
    spec: AllocationSpec.optional(),
  })
  .strict();
export type AllocationCreateBody = z.infer<typeof AllocationCreateBody>;

/** A config drive given as JSON (Ironic builds the config-2 ISO from it): {meta_data, user_data, network_data, vendor_data}. */
export const ConfigDriveContent = z
  .object({
    meta_data: JsonObject.default({}),
    /** cloud-init user data: text, or a JSON document */
    user_data: z.union([z.string(), JsonObject, z.array(z.unknown())]).optional(),
    network_data: JsonObject.optional(),
    vendor_data: JsonObject.optional(),
  })
  .strict();
export type ConfigDriveContent = z.infer<typeof ConfigDriveContent>;

/** Ironic's 1.73 spellings of `active` and `deleted`: the API accepts them and passes the older verb on. */
export const VERB_ALIASES = { deploy: "active", undeploy: "deleted" } as const;

export const ProvisionBody = z
  .object({
    target: z.enum(PROVISION_VERBS),
    /** base64 of a gzipped ISO, a URL, or the JSON form */
    configdrive: z.union([z.string(), ConfigDriveContent]).optional(),
    clean_steps: z.array(JsonObject).optional(),
    deploy_steps: z.array(JsonObject).optional(),
    service_steps: z.array(JsonObject).optional(),
    rescue_password: z.string().optional(),
    disable_ramdisk: Booleanish.optional(),
    /** 1.92: a runbook (uuid or name) whose steps are the clean or service steps */
    runbook: z.string().max(255).nullable().optional(),
  })
  .strict();
export type ProvisionBody = z.infer<typeof ProvisionBody>;

/** PUT …/states/provision as a client sends it: a verb or one of its 1.73 aliases. */
export const ProvisionRequestBody = ProvisionBody.extend({
  target: z.enum([...PROVISION_VERBS, "deploy", "undeploy"]),
});
export type ProvisionRequestBody = z.infer<typeof ProvisionRequestBody>;

/** Anvil's GET /v1/nodes/{id}/steps: which plan to show. */
export const StepsQuery = z.object({ kind: z.enum(STEP_KINDS).default("clean") }).strict();

export const PowerBody = z
  .object({
    target: z.enum(POWER_TARGETS),
    timeout: z.number().int().positive().optional(),
  })
  .strict();
export type PowerBody = z.infer<typeof PowerBody>;

export const BootDeviceBody = z
  .object({ boot_device: z.enum(BOOT_DEVICES), persistent: Booleanish.optional() })
  .strict();

export const MaintenanceBody = z
  .object({ reason: z.string().max(4096).nullable().optional() })
  .strict()
  .nullable();

export const TraitsBody = z.object({ traits: z.array(Trait).max(50) }).strict();

export const JsonPatch = z
  .array(
    z
      .object({
        op: z.enum(["add", "replace", "remove"]),
        path: z
          .string()
          .max(1024)
          .regex(/^\/[^\s]*$/, "A JSON Patch path starts with /"),
        value: z.unknown().optional(),
      })
      .strict(),
  )
  .min(1)
  // the stock CLI sends one operation per changed key; a bound keeps one request's work bounded
  .max(256);
export type JsonPatch = z.infer<typeof JsonPatch>;
