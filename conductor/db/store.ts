import type { NodeHistoryRecord } from "../../shared/history.ts";
import { Conflict, Invalid, NotFound } from "../errors.ts";
import type {
  AllocationRecord,
  ConductorRecord,
  NodeRecord,
  PortRecord,
  PortgroupRecord,
} from "../../shared/resources.ts";
import type { ChassisRecord } from "../../shared/chassis.ts";
import type { DeployTemplateRecord } from "../../shared/deploy-template.ts";
import type { InspectionRuleRecord } from "../../shared/inspection-rule.ts";
import type { RunbookRecord } from "../../shared/runbook.ts";
import type { VolumeConnectorRecord, VolumeTargetRecord } from "../../shared/volume.ts";
import type { CandidateRequest } from "./candidates.ts";

/**
 * The default node list page (Ironic's short fields and links) as JSON text. At 1,000 rows a page, building a
 * view object per row and stringifying them was most of a list request's CPU. SQLite writes the text itself
 * (group_concat, in C, in the conductor's process). PostgreSQL's JSON functions cost more than the rows (2.6 ms
 * against 0.35 ms a page), so there storedSummariesJson adds the links. Each node's object is the generated
 * column `list_json` in both schemas, written by listJsonSql (docs/cluster.md).
 */
export interface SummaryJsonPage {
  /** A JSON array of objects: SUMMARY_JSON_FIELDS, then `links`. */
  json: Buffer;
  count: number;
  /** The last object's uuid (the next page's marker), null on an empty page. */
  lastUuid: string | null;
}

/** A node of a detail page as stored: its shown text and what each request adds to it. */
export interface ShownNode {
  uuid: string;
  conductor_group: string;
  owner: string | null;
  lessee: string | null;
  /** The shown text: `{"uuid":…` up to `conductor`, the object left open; as text, or its UTF-8 bytes */
  shown: string | Buffer;
  /** Where each redactable member of it starts and ends (node-shown.ts's REDACTABLE_NODE_FIELDS) */
  cuts: readonly number[];
}

export const NODE_SORT_KEYS = [
  "id",
  "uuid",
  "name",
  "created_at",
  "updated_at",
  "provision_state",
  "power_state",
  "driver",
  "resource_class",
  "maintenance",
  "conductor_group",
] as const;
export type NodeSortKey = (typeof NODE_SORT_KEYS)[number];

/** Node fields kept as columns: listing them needs no document parsing. */
export const NODE_SUMMARY_FIELDS = [
  "uuid",
  "name",
  "instance_uuid",
  "maintenance",
  "power_state",
  "provision_state",
  "driver",
  "resource_class",
  "conductor_group",
  "owner",
  "lessee",
  "fault",
  "reservation",
  "created_at",
  "updated_at",
] as const;
export type NodeSummaryField = (typeof NODE_SUMMARY_FIELDS)[number];
export type NodeSummary = Pick<NodeRecord, NodeSummaryField>;
/** A locked node as a takeover sees it: who holds it, and what places it on the ring. */
export type ReservedNode = Pick<NodeRecord, "uuid" | "conductor_group"> & { reservation: string };

/** The columns to read for `columns` (all when absent), uuid first, each once. */
export function summaryColumns(columns: readonly NodeSummaryField[] | undefined): NodeSummaryField[] {
  if (columns === undefined) return [...NODE_SUMMARY_FIELDS];
  return [...new Set<NodeSummaryField>(["uuid", ...columns])];
}

/**
 * driver_internal_info keys the schema indexes (generated columns over the document, for takeovers): flows
 * write them under these names, so a rename here is a migration.
 */
export const INDEXED_INTERNAL_KEYS = {
  ramdiskPreparedBy: "ramdisk_prepared_by",
  instancePreparedBy: "instance_prepared_by",
} as const;

/** Keys of driver_internal_info to set; `undefined` removes a key. */
export type InternalInfoChanges = Readonly<Record<string, unknown>>;

export interface Page {
  limit?: number;
  /** uuid of the last item of the previous page */
  marker?: string;
  sortKey?: string;
  sortDir?: "asc" | "desc";
}

export interface NodeFilter {
  provision_state?: string;
  maintenance?: boolean;
  associated?: boolean;
  resource_class?: string;
  driver?: string;
  conductor_group?: string;
  instance_uuid?: string;
  fault?: string;
  owner?: string;
  lessee?: string;
  retired?: boolean;
  /** only nodes reserved by this conductor */
  reservation?: string;
  /** only nodes this project owns or leases (a project user's view) */
  project?: string;
  /** only nodes someone holds (true) or no one holds (false) */
  reserved?: boolean;
  /** only nodes in this chassis */
  chassis_uuid?: string;
  /** only the children of this node (its uuid) */
  parent_node?: string;
  /** leave out nodes that have a parent (Ironic's default node list) */
  exclude_children?: boolean;
  /** only nodes in one of these shards */
  shard?: readonly string[];
  /** 1.104: only nodes with this instance name */
  instance_name?: string;
  /** only nodes whose description holds this text (case-insensitive, as Ironic's LIKE on MySQL) */
  description_contains?: string;
  /** only nodes with a shard (true) or without one (false) */
  sharded?: boolean;
  /** only nodes whose serial console is enabled (read from the document by the database) */
  console_enabled?: true;
}

/** One entry of GET /v1/shards: a shard's name ("None" for nodes without one, as Ironic) and its nodes. */
export interface ShardCount {
  name: string;
  count: number;
}

/** Filters on the node a port or port group belongs to (1.82 shard, 1.99 conductor_groups). */
export interface OfNodeFilter {
  /** only those of nodes in one of these shards */
  shard?: readonly string[];
  /** only those of nodes in one of these conductor groups */
  conductor_groups?: readonly string[];
}

export interface PortFilter extends OfNodeFilter {
  node_uuid?: string;
  address?: string;
  portgroup_uuid?: string;
  /** 1.97: only ports whose description holds this text */
  description_contains?: string;
  /** only ports of nodes this project owns or leases */
  project?: string;
}

/** Volume connectors and targets are listed by node, and scoped to a project through their node. */
export interface VolumeFilter {
  node_uuid?: string;
  /** only those of nodes this project owns or leases */
  project?: string;
}

export interface PortgroupFilter extends OfNodeFilter {
  node_uuid?: string;
  address?: string;
  /** only port groups of nodes this project owns or leases */
  project?: string;
}

export interface AllocationFilter {
  node_uuid?: string;
  resource_class?: string;
  state?: string;
  owner?: string;
}

/** A bearer token as the database keeps it: never the token itself, only its SHA-256 digest. */
export interface StoredToken {
  id: string;
  /** hex SHA-256 of the token */
  digest: string;
  user: string;
  /**
   * HMAC-SHA256, keyed by the token itself, of the user's htpasswd entry and roles line when it was issued:
   * a changed password, role or project no longer matches, so the token dies without a scan of the table.
   */
  fingerprint: string;
  created_at: string;
  expires_at: string;
  revoked: boolean;
}

/** Where tokens live: the conductors' shared database (Store implements it), or memory in unit tests. */
export interface TokenStore {
  /** Adds `token` unless its user already holds `maxPerUser` live ones; purges dead rows first. */
  insertToken(token: StoredToken, options: { now: string; maxPerUser: number }): Promise<boolean>;
  tokenByDigest(digest: string): Promise<StoredToken | null>;
  tokenById(id: string): Promise<StoredToken | null>;
  /** Live (unrevoked, unexpired at `now`) tokens, oldest first. */
  listTokens(now: string): Promise<StoredToken[]>;
  /** @returns whether a live token was revoked */
  revokeToken(id: string): Promise<boolean>;
}

/**
 * A stored document's methods, named as Ironic's dbapi names them (create_port, get_port, …): `One` names one
 * ("Port"), `Many` a list ("Ports"). `F` is the list filter, null where a list takes only a page. create throws
 * Duplicate (uuid or a unique field taken) and, for a node's child, NodeNotFound; update NotFound, Duplicate,
 * NodeNotFound; delete NotFound. get is by uuid, or by uuid or name where the resource has a unique name.
 */
export type DocumentMethods<T, F, One extends string, Many extends string> = {
  [V in keyof Verbs<T, F> as `${V}${V extends "list" ? Many : One}`]: Verbs<T, F>[V];
};
interface Verbs<T, F> {
  create(record: T): Promise<T>;
  get(ident: string): Promise<T | null>;
  list: F extends null ? (page: Page) => Promise<T[]> : (filter: F, page: Page) => Promise<T[]>;
  update(ident: string, patch: Partial<T>): Promise<T>;
  delete(uuid: string): Promise<void>;
}

/**
 * Every resource kept as a document (sql/tables.ts describes their tables). A runbook list with `project`
 * holds that project's runbooks and the public ones; a chassis is deleted only while no node names it
 * (ChassisNotEmpty).
 */
export type StoredDocuments = DocumentMethods<PortRecord, PortFilter, "Port", "Ports"> &
  DocumentMethods<PortgroupRecord, PortgroupFilter, "Portgroup", "Portgroups"> &
  DocumentMethods<AllocationRecord, AllocationFilter, "Allocation", "Allocations"> &
  DocumentMethods<ChassisRecord, null, "Chassis", "Chassis"> &
  DocumentMethods<VolumeConnectorRecord, VolumeFilter, "VolumeConnector", "VolumeConnectors"> &
  DocumentMethods<VolumeTargetRecord, VolumeFilter, "VolumeTarget", "VolumeTargets"> &
  DocumentMethods<DeployTemplateRecord, null, "DeployTemplate", "DeployTemplates"> &
  DocumentMethods<RunbookRecord, { project?: string }, "Runbook", "Runbooks"> &
  DocumentMethods<InspectionRuleRecord, { phase?: string }, "InspectionRule", "InspectionRules">;

/** Persistence for nodes and the documents about them. Every method is atomic on its own. */
export interface Store extends TokenStore, StoredDocuments {
  /**
   * Inserts a new node, and after it its first history entry when one is given: a create that conflicts
   * leaves no entry, and the entry is readable once this settles (SQLite writes both in one transaction).
   * @throws Duplicate naming the uuid, name or instance_uuid already taken
   */
  createNode(node: NodeRecord, history?: NodeHistoryRecord): Promise<NodeRecord>;
  /** By uuid or by name. */
  getNode(ident: string): Promise<NodeRecord | null>;
  listNodes(filter: NodeFilter, page: Page): Promise<NodeRecord[]>;
  /**
   * Like listNodes, but only summary columns (the fast path of GET /v1/nodes): `columns` when given (uuid is
   * always read), else all of them. Reading only what a page shows matters: building each value is most of the
   * cost of a 1,000-row page.
   */
  listNodeSummaries<F extends NodeSummaryField = NodeSummaryField>(
    filter: NodeFilter,
    page: Page,
    columns?: readonly F[],
  ): Promise<Pick<NodeSummary, F | "uuid">[]>;
  /**
   * The default GET /v1/nodes page as JSON text built by the database: the same rows, order and paging as
   * listNodeSummaries, each object carrying SUMMARY_JSON_FIELDS and links under `linkBase`.
   */
  listNodeSummaryJson(filter: NodeFilter, page: Page, linkBase: string): Promise<SummaryJsonPage>;
  /**
   * The detail page's rows as their shown texts (conductor/db/node-shown.ts): the same rows, order and paging
   * as listNodes, with the columns a request adds to each, handed to `use`, whose answer this returns. null
   * when a node of the page has no shown text in this form (stored before it, unshowable, or being written): the
   * caller shows that page by the view path. The rows are good while `use` runs: the bytes of a text read as
   * bytes are used again once it returns.
   */
  listNodeShown<T>(filter: NodeFilter, page: Page, use: (rows: readonly ShownNode[] | null) => T): Promise<T>;
  /** Writes the shown text of each node without one in this form (run at start). @returns how many */
  fillShownTexts(): Promise<number>;
  /**
   * Nodes whose boot files were written by a conductor not in `live`: in one of `waitStates` with
   * driver_internal_info.ramdisk_prepared_by set, or `active` with instance_prepared_by set. Read from indexes,
   * not by parsing every node (what a takeover adopts).
   */
  listOrphanedBoots(options: {
    waitStates: readonly string[];
    live: readonly string[];
  }): Promise<NodeRecord[]>;
  /** Nodes per shard, most first (Ironic's get_shard_list: nodes without a shard count under "None"). */
  listShards(): Promise<ShardCount[]>;
  /** How many nodes are in each provision state (absent states have none). */
  countNodesByState(): Promise<Record<string, number>>;
  /** Node counts grouped by one indexed column (null values counted under "none"), for metrics. */
  countNodesBy(column: "provision_state" | "power_state" | "fault"): Promise<Record<string, number>>;
  /**
   * Applies a partial update. With `ifReservedBy`, the update only happens while the node's reservation equals it
   * (a lost lock must not write). @throws NodeNotFound, NodeLocked, DuplicateName
   */
  updateNode(
    uuid: string,
    patch: Partial<NodeRecord>,
    options?: { ifReservedBy?: string | null },
  ): Promise<NodeRecord>;
  /**
   * Merges `changes` into driver_internal_info (and bumps updated_at) in the database, without reading and
   * rewriting the whole document; `ifReservedBy` as for updateNode. @throws NodeNotFound, NodeLocked
   */
  updateDriverInternalInfo(
    uuid: string,
    changes: InternalInfoChanges,
    options?: { ifReservedBy?: string | null },
  ): Promise<NodeRecord>;
  /** The write-progress record (driver_internal_info.deploy_progress; undefined clears it), as above. */
  setDeployProgress(
    uuid: string,
    progress: unknown,
    options?: { ifReservedBy?: string | null },
  ): Promise<NodeRecord>;
  /** Deletes the node with its ports and inventory. */
  deleteNode(uuid: string): Promise<void>;
  /** Atomic test-and-set of the reservation. @throws NodeLocked when another holder has it. */
  reserveNode(uuid: string, holder: string): Promise<NodeRecord>;
  releaseNode(uuid: string, holder: string): Promise<void>;
  /** Clears every reservation a holder left (restart); returns the uuids. */
  releaseAllReservations(holder: string): Promise<string[]>;
  /**
   * The nodes locked by any of `holders`, by equality on the reservation index. A takeover pass asks this on
   * every heartbeat: `reservation IS NOT NULL` read the whole fleet wherever the planner had no statistics
   * (SQLite always; PostgreSQL until its first ANALYZE), 40–160 ms at 10^5 nodes.
   */
  listReservedBy(holders: readonly string[]): Promise<ReservedNode[]>;

  /** The digest of the one-time token issued to the node's agent for one boot (never the token). */
  getAgentToken(uuid: string): Promise<{ digest: string; bootId: string } | null>;
  setAgentToken(uuid: string, record: { digest: string; bootId: string } | null): Promise<void>;

  /**
   * The cluster-wide secret called `name`: `candidate` is stored if there is none yet, and whichever
   * conductor stored first wins (insert-if-absent, then read), so every conductor gets the same value.
   */
  sharedSecret(name: string, candidate: string): Promise<string>;

  saveInventory(uuid: string, inventory: unknown): Promise<void>;
  getInventory(uuid: string): Promise<unknown>;

  /**
   * In one transaction: chooses a free node (available, unreserved, no instance, not in maintenance, power
   * known) that matches the request, in SQL from indexed columns, and binds it to the allocation. Two racing
   * claims never get the same node, and neither waits for the other's choice.
   */
  claimNode(allocationUuid: string, request: CandidateRequest): Promise<NodeRecord | null>;

  /** The templates named by any of `names` (a node's instance traits), by name. */
  listDeployTemplatesByNames(names: readonly string[]): Promise<DeployTemplateRecord[]>;

  /**
   * Registers a running conductor. In one transaction, rows of the same hostname that are stale (no heartbeat
   * since `staleBefore`) or listed in `retire` (a crashed predecessor) go offline first.
   * @throws ConductorAlreadyRegistered while another online row has the hostname
   */
  registerConductor(
    record: ConductorRecord,
    options: { staleBefore: number; retire: readonly string[] },
  ): Promise<void>;
  /** Records a heartbeat (and the URL once known); false when the row is gone or offline. */
  touchConductor(identity: string, at: number, url?: string): Promise<boolean>;
  /** Marks the conductor offline (clean stop, or found dead). */
  retireConductor(identity: string): Promise<void>;
  /** Every row, online or not, oldest first. */
  listConductors(): Promise<ConductorRecord[]>;
  /**
   * Deletes the rows of `identities` (dead conductors, as Membership judges them) that hold no node's lock and
   * are not their hostname's latest row; returns the identities deleted. Each start registers a new identity,
   * so without this the rows (read on every heartbeat) grow with every restart.
   */
  pruneConductors(identities: readonly string[]): Promise<string[]>;

  /** Appends to a node's history (deleted with the node). */
  addNodeHistory(entry: NodeHistoryRecord): Promise<void>;
  /** A node's history, oldest first (created_at, then insertion); `marker`: the last uuid of the previous page. */
  listNodeHistory(nodeUuid: string, page: { limit?: number; marker?: string }): Promise<NodeHistoryRecord[]>;
  getNodeHistory(nodeUuid: string, eventUuid: string): Promise<NodeHistoryRecord | null>;

  close(): Promise<void>;
}

export class ConductorAlreadyRegistered extends Conflict {
  constructor(readonly hostname: string) {
    super(
      `Conductor ${hostname} already registered and alive; refusing to start a second one under that name.`,
    );
  }
}

export class NodeNotFound extends NotFound {
  constructor(readonly ident: string) {
    super(`Node ${ident} could not be found.`);
  }
}
export class NodeLocked extends Conflict {
  constructor(
    readonly uuid: string,
    readonly holder: string | null,
  ) {
    super(
      `Node ${uuid} is locked by host ${holder ?? "unknown"}, please retry after the current operation is completed.`,
    );
  }
}
export class Duplicate extends Conflict {}
/** Ironic's ChassisNotEmpty (an Invalid: 400). */
export class ChassisNotEmpty extends Invalid {
  constructor(readonly uuid: string) {
    super(`Cannot complete the requested action because chassis ${uuid} contains nodes.`);
  }
}
export { NotFound };
