import type { Identity } from "../auth/identity.ts";
import { nodeRedactions } from "../auth/node-access.ts";
import { NEWEST_NODE_FORM_MINOR, REDACTABLE_NODE_FIELDS, redactedText } from "../db/node-shown.ts";
import type { ShownNode } from "../db/store.ts";
import { arrayOf } from "../db/summary-json.ts";
import type { ViewContext } from "./views.ts";

/**
 * Whether a detail page at this microversion can be written from the stored shown texts: its full form is
 * the newest one (1.109 on). Older versions, `fields=` and rows without a current text take the view path.
 */
export function shownTextServes(minor: number): boolean {
  return minor >= NEWEST_NODE_FORM_MINOR;
}

const SUBRESOURCES = ["ports", "states", "portgroups", "volume"] as const;

/**
 * The `[…]` of a detail page from its rows' shown texts: each text with the caller's redactions spliced in
 * (node_sanitize's notes, by the same rules as redactNodeView), then what the request adds: `conductor`, the
 * links and the sub-resources' links. Equal to the view path's nodeView + redactNodeView, member for member;
 * no node is parsed or stringified.
 */
export function shownNodesJson(rows: readonly ShownNode[], ctx: ViewContext, who: Identity): Buffer {
  // escaping is per character: the escaped base and uuid make the escaped link
  const base = JSON.stringify(ctx.baseUrl).slice(1, -1);
  // the notes depend on the caller and the node's owner and lessee only: worked out once per pair
  const notesOf = new Map<string, (string | undefined)[]>();
  const parts = rows.map((row) => {
    const pair = `${row.owner ?? "\u0000"}\u0001${row.lessee ?? "\u0000"}`;
    let notes = notesOf.get(pair);
    if (notes === undefined) {
      const redacted = new Map(nodeRedactions(who, row));
      notes = REDACTABLE_NODE_FIELDS.map((field) =>
        redacted.has(field) ? JSON.stringify(redacted.get(field)) : undefined,
      );
      notesOf.set(pair, notes);
    }
    const id = JSON.stringify(row.uuid).slice(1, -1);
    const self = `${base}/v1/nodes/${id}`;
    const bookmark = `${base}/nodes/${id}`;
    const links = (tail: string) =>
      `[{"href":"${self}${tail}","rel":"self"},{"href":"${bookmark}${tail}","rel":"bookmark"}]`;
    let text = `${redactedText(row.shown, row.cuts, notes)},"conductor":${JSON.stringify(ctx.conductorOf(row))}`;
    text += `,"links":${links("")}`;
    for (const sub of SUBRESOURCES) text += `,"${sub}":${links(`/${sub}`)}`;
    return `${text}}`;
  });
  return arrayOf(parts);
}
