import type { ChassisRecord } from "../../../shared/chassis.ts";
import type { DeployTemplateRecord } from "../../../shared/deploy-template.ts";
import type { InspectionRuleRecord } from "../../../shared/inspection-rule.ts";
import type { RunbookRecord } from "../../../shared/runbook.ts";
import type { AllocationRecord, PortgroupRecord, PortRecord } from "../../../shared/resources.ts";
import type { VolumeConnectorRecord, VolumeTargetRecord } from "../../../shared/volume.ts";
import { ChassisNotEmpty } from "../store.ts";
import type { AllocationFilter, PortFilter, PortgroupFilter, VolumeFilter } from "../store.ts";

/** A stored resource: a JSON document named by its uuid (a child of a node has its node_uuid). */
export type Doc = { uuid: string };

/**
 * A resource kept as a JSON document with some of its fields mirrored in columns (a table of Ironic's
 * db/sqlalchemy/models.py): the SQL core creates, reads, lists, updates and deletes every one of them alike.
 * `T` is the zod schema's record, `F` the list filter (null: a list takes only a page).
 */
export interface Table<T extends Doc, F, One extends string = string, Many extends string = string> {
  name: string;
  /** The Store's methods (DocumentMethods): create<One>, …, list<Many>; Ironic's texts say One in words. */
  methods: readonly [One, Many];
  /** Fields mirrored as columns (uuid first); created_at is written once, the others by every update. */
  columns: readonly (keyof T & string)[];
  /** Unique columns besides uuid: text of the broken constraint → what Ironic's Duplicate message names. */
  unique?: readonly (readonly [string, (record: Partial<T>) => string])[];
  /** Looked up (and updated) by uuid or name. */
  named?: boolean;
  /** A node's child: a missing node is NodeNotFound, and a project lists those of the nodes it holds. */
  ofNode?: boolean;
  /** Owned by a project (an `owner` column): a project lists its own and the public ones (`public: true`). */
  ownedOrPublic?: boolean;
  /** Equality filters: a column's value, or else a top-level key of the document. */
  filters?: readonly (keyof NonNullable<F> & string)[];
  /** Keys a list may sort by (keyset paging), "id" the default. */
  sortKeys?: readonly string[];
  /** Deleted only while no row of `table` names it in `column`; else `error`. */
  heldBy?: { table: string; column: string; error: (uuid: string) => Error };
}

/** A descriptor with its record and filter types given, its method names inferred. */
const table =
  <T extends Doc, F extends object | null = null>() =>
  <One extends string, Many extends string>(descriptor: Table<T, F, One, Many>) =>
    descriptor;

const mac = (r: { address?: string | null }) => `MAC address ${r.address}`;
const name = (r: { name?: string | null }) => `name ${r.name}`;
const VOLUME_SORT = ["id", "uuid", "created_at", "updated_at", "node_uuid"];
/** Ironic's …AlreadyExists (MAC) and …DuplicateName texts of ports and port groups. */
const MAC_AND_NAME = [
  ["address", mac],
  ["name", name],
] as const;

/** A port (1.88: named) is found by uuid or name. */
export const PORTS = table<PortRecord, PortFilter>()({
  name: "ports",
  methods: ["Port", "Ports"],
  columns: ["uuid", "name", "address", "node_uuid"],
  unique: MAC_AND_NAME,
  named: true,
  ofNode: true,
  filters: ["node_uuid", "address", "portgroup_uuid"],
});

export const PORTGROUPS = table<PortgroupRecord, PortgroupFilter>()({
  name: "portgroups",
  methods: ["Portgroup", "Portgroups"],
  columns: ["uuid", "name", "address", "node_uuid"],
  unique: MAC_AND_NAME,
  named: true,
  ofNode: true,
  filters: ["node_uuid", "address"],
});

export const ALLOCATIONS = table<AllocationRecord, AllocationFilter>()({
  name: "allocations",
  methods: ["Allocation", "Allocations"],
  columns: ["uuid", "name", "state", "node_uuid", "resource_class"],
  unique: [["name", name]],
  named: true,
  filters: ["node_uuid", "resource_class", "state", "owner"],
});

export const CHASSIS = table<ChassisRecord>()({
  name: "chassis",
  methods: ["Chassis", "Chassis"],
  columns: ["uuid", "created_at"],
  sortKeys: ["id", "uuid", "created_at"],
  heldBy: { table: "nodes", column: "chassis_uuid", error: (uuid) => new ChassisNotEmpty(uuid) },
});

export const VOLUME_CONNECTORS = table<VolumeConnectorRecord, VolumeFilter>()({
  name: "volume_connectors",
  methods: ["VolumeConnector", "VolumeConnectors"],
  columns: ["uuid", "node_uuid", "type", "connector_id", "created_at"],
  unique: [["connector_id", (r) => `type ${r.type} and connector ID ${r.connector_id}`]],
  ofNode: true,
  filters: ["node_uuid"],
  sortKeys: [...VOLUME_SORT, "type", "connector_id"],
});

export const VOLUME_TARGETS = table<VolumeTargetRecord, VolumeFilter>()({
  name: "volume_targets",
  methods: ["VolumeTarget", "VolumeTargets"],
  columns: ["uuid", "node_uuid", "boot_index", "created_at"],
  unique: [["boot_index", (r) => `boot index '${r.boot_index}' for the same node`]],
  ofNode: true,
  filters: ["node_uuid"],
  sortKeys: [...VOLUME_SORT, "boot_index"],
});

const STEP_LIST_SORT = ["id", "uuid", "name", "created_at"];

export const DEPLOY_TEMPLATES = table<DeployTemplateRecord>()({
  name: "deploy_templates",
  methods: ["DeployTemplate", "DeployTemplates"],
  columns: ["uuid", "name", "created_at"],
  unique: [["name", name]],
  named: true,
  sortKeys: STEP_LIST_SORT,
});

/** Ironic 1.92 runbooks: a deploy template's table with an owner, found by uuid or name (a trait). */
export const RUNBOOKS = table<RunbookRecord, { project?: string }>()({
  name: "runbooks",
  methods: ["Runbook", "Runbooks"],
  columns: ["uuid", "name", "owner", "created_at"],
  unique: [["name", name]],
  named: true,
  ownedOrPublic: true,
  sortKeys: STEP_LIST_SORT,
});

/** Ironic 1.96 inspection rules; a list filters by phase (the only one is "main"). */
export const INSPECTION_RULES = table<InspectionRuleRecord, { phase?: string }>()({
  name: "inspection_rules",
  methods: ["InspectionRule", "InspectionRules"],
  columns: ["uuid", "phase", "created_at"],
  filters: ["phase"],
  // NOTE: priority is not a sort key: the core sorts columns other than id as text, and 10 < 9 as text
  sortKeys: ["id", "uuid", "phase", "created_at"],
});
