import type { ChassisRecord } from "../../../shared/chassis.ts";
import type { DeployTemplateRecord } from "../../../shared/deploy-template.ts";
import type { InspectionRuleRecord } from "../../../shared/inspection-rule.ts";
import type { RunbookRecord } from "../../../shared/runbook.ts";
import type { AllocationRecord, PortgroupRecord, PortRecord } from "../../../shared/resources.ts";
import type { VolumeConnectorRecord, VolumeTargetRecord } from "../../../shared/volume.ts";
import type { AllocationFilter, PortFilter, PortgroupFilter, VolumeFilter } from "../store.ts";

/** A stored resource: a JSON document named by its uuid (a child of a node has its node_uuid). */
export type Doc = { uuid: string };

/**
 * A resource kept as a JSON document with some of its fields mirrored in columns (a table of Ironic's
 * db/sqlalchemy/models.py): the SQL core creates, reads, lists, updates and deletes every one of them alike.
 * `T` is the zod schema's record, `F` the list filter.
 */
export interface Table<T extends Doc, F extends object = object> {
  name: string;
  /** The resource as Ironic's texts name it: "Volume connector 1be2… could not be found." */
  noun: string;
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
  filters?: readonly (keyof F & string)[];
  /** Keys a list may sort by (keyset paging), "id" the default. */
  sortKeys?: readonly string[];
}

const mac = (r: { address?: string | null }) => `MAC address ${r.address}`;
const name = (r: { name?: string | null }) => `name ${r.name}`;
const VOLUME_SORT = ["id", "uuid", "created_at", "updated_at", "node_uuid"];

/** Ironic's PortAlreadyExists (MAC) and PortDuplicateName (1.88) texts; a port is found by uuid or name. */
export const PORTS: Table<PortRecord, PortFilter> = {
  name: "ports",
  noun: "Port",
  columns: ["uuid", "name", "address", "node_uuid"],
  unique: [
    ["address", mac],
    ["name", name],
  ],
  named: true,
  ofNode: true,
  filters: ["node_uuid", "address", "portgroup_uuid"],
};

/** Ironic's PortgroupAlreadyExists, PortgroupDuplicateName and PortgroupMACAlreadyExists texts. */
export const PORTGROUPS: Table<PortgroupRecord, PortgroupFilter> = {
  name: "portgroups",
  noun: "Portgroup",
  columns: ["uuid", "name", "address", "node_uuid"],
  unique: [
    ["address", mac],
    ["name", name],
  ],
  named: true,
  ofNode: true,
  filters: ["node_uuid", "address"],
};

export const ALLOCATIONS: Table<AllocationRecord, AllocationFilter> = {
  name: "allocations",
  noun: "Allocation",
  columns: ["uuid", "name", "state", "node_uuid", "resource_class"],
  unique: [["name", name]],
  named: true,
  filters: ["node_uuid", "resource_class", "state", "owner"],
};

export const CHASSIS: Table<ChassisRecord> = {
  name: "chassis",
  noun: "Chassis",
  columns: ["uuid", "created_at"],
  sortKeys: ["id", "uuid", "created_at"],
};

export const VOLUME_CONNECTORS: Table<VolumeConnectorRecord, VolumeFilter> = {
  name: "volume_connectors",
  noun: "Volume connector",
  columns: ["uuid", "node_uuid", "type", "connector_id", "created_at"],
  unique: [["connector_id", (r) => `type ${r.type} and connector ID ${r.connector_id}`]],
  ofNode: true,
  filters: ["node_uuid"],
  sortKeys: [...VOLUME_SORT, "type", "connector_id"],
};

export const VOLUME_TARGETS: Table<VolumeTargetRecord, VolumeFilter> = {
  name: "volume_targets",
  noun: "Volume target",
  columns: ["uuid", "node_uuid", "boot_index", "created_at"],
  unique: [["boot_index", (r) => `boot index '${r.boot_index}' for the same node`]],
  ofNode: true,
  filters: ["node_uuid"],
  sortKeys: [...VOLUME_SORT, "boot_index"],
};

const STEP_LIST_SORT = ["id", "uuid", "name", "created_at"];

export const DEPLOY_TEMPLATES: Table<DeployTemplateRecord> = {
  name: "deploy_templates",
  noun: "Deploy template",
  columns: ["uuid", "name", "created_at"],
  unique: [["name", name]],
  named: true,
  sortKeys: STEP_LIST_SORT,
};

/** Ironic 1.92 runbooks: a deploy template's table with an owner, found by uuid or name (a trait). */
export const RUNBOOKS: Table<RunbookRecord> = {
  name: "runbooks",
  noun: "Runbook",
  columns: ["uuid", "name", "owner", "created_at"],
  unique: [["name", name]],
  named: true,
  ownedOrPublic: true,
  sortKeys: STEP_LIST_SORT,
};

/** Ironic 1.96 inspection rules; a list filters by phase (the only one is "main"). */
export const INSPECTION_RULES: Table<InspectionRuleRecord, { phase?: string }> = {
  name: "inspection_rules",
  noun: "Inspection rule",
  columns: ["uuid", "phase", "created_at"],
  filters: ["phase"],
  // NOTE: priority is not a sort key: the core sorts columns other than id as text, and 10 < 9 as text
  sortKeys: ["id", "uuid", "phase", "created_at"],
};
