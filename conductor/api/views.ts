import {
  NodeRecord as NodeRecordSchema,
  PORTGROUP_LATER_FIELDS,
  PORT_LATER_FIELDS,
  withLaterFields,
} from "../../shared/resources.ts";
import type { AllocationRecord, NodeRecord, PortRecord, PortgroupRecord } from "../../shared/resources.ts";
import { NODE_SUMMARY_FIELDS, type NodeSummary, type NodeSummaryField } from "../db/store.ts";
import { SUMMARY_JSON_FIELDS } from "../db/summary-json.ts";
import { MASK } from "../../shared/secrets.ts";
import { detailFields, nodeFieldAllowed, shownNodeField } from "../db/node-shown.ts";

export { MASK, nodeFieldAllowed };

const NODE_RECORD_FIELDS = Object.keys(NodeRecordSchema.shape);

export interface ViewContext {
  /** requested microversion minor */
  minor: number;
  /** e.g. http://127.0.0.1:6385 */
  baseUrl: string;
  /** the node's `conductor` field: its owner on the hash ring (null when no live conductor serves it) */
  conductorOf(node: { uuid: string; conductor_group: string }): string | null;
}

/** Ironic's short list fields, in its order: what PostgreSQL keeps per node for the default page. */
export const NODE_LIST_FIELDS = SUMMARY_JSON_FIELDS;

/**
 * Whether the default short list can be written by the database (listNodeSummaryJson): every default field
 * exists at this microversion, and none of them is one that policy redacts (redactNodeView).
 */
export function shortListInSql(minor: number): boolean {
  return NODE_LIST_FIELDS.every((field) => nodeFieldAllowed(field, minor));
}

/** self + bookmark links for `path` (e.g. "nodes/<uuid>/ports"). */
function links(ctx: ViewContext, path: string): { href: string; rel: string }[] {
  return [
    { href: `${ctx.baseUrl}/v1/${path}`, rel: "self" },
    { href: `${ctx.baseUrl}/${path}`, rel: "bookmark" },
  ];
}

/** One field of a node in API form: secrets masked at any depth, the conductor's name filled in. */
function nodeField(node: NodeSummary | NodeRecord, field: string, ctx: ViewContext): unknown {
  return field === "conductor" ? ctx.conductorOf(node) : shownNodeField(node as NodeRecord, field);
}

/** Fields a node document may lack (added later, or not stored): shown by nodeField's defaults. */
const LATER_NODE_FIELDS = new Set([
  ...["conductor", "parent_node", "firmware_interface", "service_step", "disable_power_off"],
  ...["instance_name", "health"],
]);

/**
 * A node as the API shows it. `fields` selects; without it, `detail` decides between the short list form
 * and the full form. A summary (columns only) is enough for the short form and for column-only fields.
 */
export function nodeView(
  node: NodeRecord | NodeSummary,
  ctx: ViewContext,
  options: { fields?: readonly string[]; detail: boolean },
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (options.detail && !options.fields) {
    // the hot path of /v1/nodes/detail: the field list is pre-filtered for the version
    for (const field of detailFields(ctx.minor)) out[field] = nodeField(node, field, ctx);
    const self = `${ctx.baseUrl}/v1/nodes/${node.uuid}`;
    const bookmark = `${ctx.baseUrl}/nodes/${node.uuid}`;
    out.links = [
      { href: self, rel: "self" },
      { href: bookmark, rel: "bookmark" },
    ];
    for (const sub of ["ports", "states", "portgroups", "volume"]) {
      out[sub] = [
        { href: `${self}/${sub}`, rel: "self" },
        { href: `${bookmark}/${sub}`, rel: "bookmark" },
      ];
    }
    return out;
  }
  for (const field of options.fields ?? NODE_LIST_FIELDS) {
    const shown = field in node || LATER_NODE_FIELDS.has(field);
    if (shown && nodeFieldAllowed(field, ctx.minor)) {
      out[field] = nodeField(node, field, ctx);
    }
  }
  out.links = links(ctx, `nodes/${node.uuid}`);
  return out;
}

/** True when every wanted field is a column: the list can skip reading documents. */
export function summaryIsEnough(fields: readonly string[] | undefined): boolean {
  return (fields ?? NODE_LIST_FIELDS).every((f) => (NODE_SUMMARY_FIELDS as readonly string[]).includes(f));
}

/**
 * The columns a short list reads: the fields shown, and owner and lessee, which decide what a project user may
 * see. Call only when summaryIsEnough(fields).
 */
export function summaryColumnsFor(fields: readonly string[] | undefined): NodeSummaryField[] {
  const shown = (fields ?? NODE_LIST_FIELDS) as readonly NodeSummaryField[];
  return [...shown, "owner", "lessee"];
}

/** Every field name a node view can carry: used to reject unknown ?fields=. */
export const NODE_VIEW_FIELDS = new Set<string>([...NODE_RECORD_FIELDS, "conductor"]);

export const PORT_LIST_FIELDS = ["uuid", "address"];

/** Port fields and the microversion that introduced them (absent: present since 1.1). */
const PORT_FIELD_VERSIONS: Record<string, number> = {
  internal_info: 18,
  pxe_enabled: 19,
  local_link_connection: 19,
  portgroup_uuid: 24,
  physical_network: 34,
  is_smartnic: 53,
  name: 88,
  description: 97,
  vendor: 100,
  category: 101,
  available_for_dynamic_portgroup: 111,
};

/** Whether a port field exists at the requested microversion. */
export function portFieldVisible(field: string, minor: number): boolean {
  return minor >= (PORT_FIELD_VERSIONS[field] ?? 1);
}

export function portView(
  port: PortRecord,
  ctx: ViewContext,
  options: { fields?: readonly string[]; detail: boolean },
): Record<string, unknown> {
  const all: Record<string, unknown> = withLaterFields(port, PORT_LATER_FIELDS);
  const wanted = options.fields ?? (options.detail ? Object.keys(all) : PORT_LIST_FIELDS);
  const out: Record<string, unknown> = {};
  for (const field of wanted) if (field in all && portFieldVisible(field, ctx.minor)) out[field] = all[field];
  out.links = links(ctx, `ports/${port.uuid}`);
  return out;
}

export const PORTGROUP_LIST_FIELDS = ["uuid", "address", "name"];
/** Every field a port group view can carry (for ?fields=). */
export const PORTGROUP_VIEW_FIELDS = new Set([
  ...["uuid", "name", "address", "node_uuid", "standalone_ports_supported", "internal_info", "extra"],
  ...["mode", "properties", "created_at", "updated_at", "links", "ports", "physical_network", "category"],
  "dynamic_portgroup",
]);

/** Port group fields newer than 1.23 and the microversion that shows them. */
const PORTGROUP_FIELD_VERSIONS: Record<string, number> = {
  mode: 26,
  properties: 26,
  physical_network: 102,
  category: 103,
  dynamic_portgroup: 111,
};

/** Ironic's portgroup view: fields shown from their microversion, `ports` links beside `links`. */
export function portgroupView(
  portgroup: PortgroupRecord,
  ctx: ViewContext,
  options: { fields?: readonly string[]; detail: boolean },
): Record<string, unknown> {
  const path = `portgroups/${portgroup.uuid}`;
  const all: Record<string, unknown> = {
    ...withLaterFields(portgroup, PORTGROUP_LATER_FIELDS),
    links: links(ctx, path),
    ports: links(ctx, `${path}/ports`),
  };
  for (const [field, minor] of Object.entries(PORTGROUP_FIELD_VERSIONS))
    if (ctx.minor < minor) delete all[field];
  const wanted = options.fields ?? (options.detail ? Object.keys(all) : [...PORTGROUP_LIST_FIELDS, "links"]);
  const out: Record<string, unknown> = {};
  for (const field of wanted) if (field in all) out[field] = all[field];
  if (options.fields) out.links = all.links;
  return out;
}

export function allocationView(
  allocation: AllocationRecord,
  ctx: ViewContext,
  options: { fields?: readonly string[] } = {},
): Record<string, unknown> {
  const { spec, ...rest } = allocation;
  const all: Record<string, unknown> = { ...rest, ...(spec ? { spec } : {}) };
  const out: Record<string, unknown> = {};
  for (const field of options.fields ?? Object.keys(all)) if (field in all) out[field] = all[field];
  out.links = links(ctx, `allocations/${allocation.uuid}`);
  return out;
}
