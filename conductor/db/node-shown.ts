import { NodeRecord as NodeRecordSchema, type NodeRecord } from "../../shared/resources.ts";
import { MASK, maskSecrets } from "../../shared/secrets.ts";

/**
 * How a stored node shows in the API, and the "shown text" kept for each node (table node_shown, beside the
 * node's row, not in it, so the lists never read it): the node's full (detail) form at the newest microversion
 * as JSON, secrets masked, without what each request adds (`conductor`, which the hash ring decides, and the
 * links, which carry the request's base URL). GET /v1/nodes/detail writes its page from these texts
 * (node-list.ts) instead of building and stringifying a view object per node.
 */

const NODE_RECORD_FIELDS = Object.keys(NodeRecordSchema.shape);

/** Node fields and the microversion that introduced them (absent: present since 1.1). */
const NODE_FIELD_VERSIONS: Record<string, number> = {
  driver_internal_info: 3,
  name: 5,
  inspection_started_at: 6,
  inspection_finished_at: 6,
  clean_step: 7,
  raid_config: 12,
  target_raid_config: 12,
  network_interface: 20,
  resource_class: 21,
  boot_interface: 31,
  console_interface: 31,
  deploy_interface: 31,
  inspect_interface: 31,
  management_interface: 31,
  power_interface: 31,
  raid_interface: 31,
  vendor_interface: 31,
  storage_interface: 33,
  traits: 37,
  rescue_interface: 38,
  bios_interface: 40,
  fault: 42,
  deploy_step: 44,
  conductor_group: 46,
  automated_clean: 47,
  protected: 48,
  protected_reason: 48,
  conductor: 49,
  owner: 50,
  description: 51,
  allocation_uuid: 52,
  retired: 61,
  retired_reason: 61,
  lessee: 65,
  network_data: 66,
  boot_mode: 75,
  secure_boot: 75,
  shard: 82,
  parent_node: 83,
  firmware_interface: 86,
  service_step: 87,
  disable_power_off: 95,
  instance_name: 104,
  health: 109,
};

export function nodeFieldAllowed(field: string, minor: number): boolean {
  return (NODE_FIELD_VERSIONS[field] ?? 1) <= minor;
}

/** The oldest microversion whose full form has every field: from it on, every version shows the same form. */
export const NEWEST_NODE_FORM_MINOR = Math.max(...Object.values(NODE_FIELD_VERSIONS));

/**
 * One stored field as the API shows it (`conductor` aside: it is the ring's, not the document's): secrets
 * masked at any depth, defaults for fields a document written before them lacks. undefined: not shown.
 */
export function shownNodeField(node: Partial<NodeRecord>, field: string): unknown {
  switch (field) {
    case "driver_info":
    case "driver_internal_info":
      return maskSecrets(node[field]);
    case "instance_info": {
      const info = node.instance_info as Record<string, unknown>;
      return maskSecrets("configdrive" in info ? { ...info, configdrive: MASK } : info);
    }
    case "parent_node":
    case "instance_name":
    case "health":
      // a document written before the field existed has none
      return node[field] ?? null;
    case "firmware_interface":
      return node.firmware_interface ?? "no-firmware";
    case "service_step":
      return node.service_step ?? {};
    case "disable_power_off": {
      // null (removed, as Ironic stores it) shows as null; a document older than the field reads false
      const value = node.disable_power_off;
      return value === undefined ? false : value;
    }
    default:
      return (node as Record<string, unknown>)[field];
  }
}

const detailFieldsByMinor = new Map<number, string[]>();

/** The fields of the full form at a microversion, `conductor` last (computed once per version). */
export function detailFields(minor: number): string[] {
  let fields = detailFieldsByMinor.get(minor);
  if (!fields) {
    fields = [...NODE_RECORD_FIELDS, "conductor"].filter((f) => nodeFieldAllowed(f, minor));
    detailFieldsByMinor.set(minor, fields);
  }
  return fields;
}

/** The shown text's fields: the newest full form up to `conductor` (which comes last, and per request). */
const SHOWN_FIELDS = detailFields(NEWEST_NODE_FORM_MINOR).filter((field) => field !== "conductor");

/** The fields a project user's view may replace by a note (node-access.ts's redactNodeView), in this order. */
export const REDACTABLE_NODE_FIELDS = ["last_error", "reservation", "driver_internal_info", "driver_info"];
if (REDACTABLE_NODE_FIELDS.includes(SHOWN_FIELDS[0] ?? "")) throw new Error("a shown text opens with uuid");

/** The REDACTABLE_NODE_FIELDS slots in the order their members come in a shown text. */
export const REDACTABLE_IN_TEXT_ORDER: readonly number[] = REDACTABLE_NODE_FIELDS.map((_, slot) => slot).sort(
  (a, b) =>
    SHOWN_FIELDS.indexOf(REDACTABLE_NODE_FIELDS[a] as string) -
    SHOWN_FIELDS.indexOf(REDACTABLE_NODE_FIELDS[b] as string),
);

/**
 * What the stored texts were written by: a text of another form (written before a change of the fields or of
 * how they show) is never served; the next start rewrites it (fillShownTexts). Bump the number whenever
 * shownNodeField or maskSecrets changes what a stored node shows as.
 */
export const SHOWN_FORM = `1:${SHOWN_FIELDS.join(",").length}.${SHOWN_FIELDS.length}.${NEWEST_NODE_FORM_MINOR}`;

/** A node's shown columns in node_shown (see storedCuts for how they read). */
export interface ShownColumns {
  /** `{"uuid":…,…,"health":…` (the members up to `conductor`, the object left open), or null: none */
  shown: string | null;
  /** `<SHOWN_FORM>/` then, per REDACTABLE_NODE_FIELDS, where its `,"name":value` member starts and ends */
  shown_cuts: string;
}

/**
 * The shown columns of a node. shown is null when a field cannot be serialised (a document stored before the
 * API's depth limits): the view path shows such a node (render.ts's UNSHOWABLE).
 */
export function shownColumns(node: NodeRecord): ShownColumns {
  let text = "{";
  const cuts = new Array<number>(REDACTABLE_NODE_FIELDS.length * 2);
  try {
    for (const field of SHOWN_FIELDS) {
      const value = shownNodeField(node, field);
      const slot = REDACTABLE_NODE_FIELDS.indexOf(field);
      if (slot >= 0) cuts[slot * 2] = text.length;
      // JSON.stringify leaves out a member whose value is undefined, and so does the shown text
      const json = value === undefined ? undefined : JSON.stringify(value);
      if (json !== undefined) text += `${text.length === 1 ? "" : ","}"${field}":${json}`;
      if (slot >= 0) cuts[slot * 2 + 1] = text.length;
    }
  } catch {
    return unshowable();
  }
  return { shown: text, shown_cuts: `${SHOWN_FORM}/${cuts.join(",")}` };
}

/** The shown columns of a node the view path must show (its text cannot be written). */
export const unshowable = (): ShownColumns => ({ shown: null, shown_cuts: `${SHOWN_FORM}/` });

/**
 * The cuts of a stored text written in this form, or null when the row's text cannot be served (missing,
 * written in another form, or unshowable).
 */
export function storedCuts(shown: string | null, cuts: string | null): number[] | null {
  if (shown === null || cuts === null || !cuts.startsWith(SHOWN_FORM) || cuts[SHOWN_FORM.length] !== "/")
    return null;
  // NOTE: read digit by digit: split and Number made ~20 objects a row, 20,000 a detail page
  const numbers = new Array<number>(REDACTABLE_NODE_FIELDS.length * 2);
  let count = 0;
  let value = -1;
  for (let i = SHOWN_FORM.length + 1; i <= cuts.length; i++) {
    const code = i === cuts.length ? 0x2c : cuts.charCodeAt(i);
    if (code >= 0x30 && code <= 0x39) {
      value = (value < 0 ? 0 : value * 10) + code - 0x30;
      if (value > 2 ** 40) return null;
    } else if (code !== 0x2c || value < 0 || count === numbers.length) return null;
    else {
      numbers[count++] = value;
      value = -1;
    }
  }
  return count === numbers.length ? numbers : null;
}
