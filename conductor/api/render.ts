import { jsonBytes } from "../../shared/json-shape.ts";

/** What a field that cannot be shown (stored before limits existed, too deep to serialise) reads as. */
export const UNSHOWABLE = {
  error:
    "This field was stored before Anvil's size and depth limits and cannot be shown; replace it with PATCH.",
};

/** A view whose fields each serialise; the ones that do not are replaced by UNSHOWABLE. */
function showable(view: unknown): unknown {
  if (typeof view !== "object" || view === null || Array.isArray(view)) return view;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(view)) {
    out[key] = Number.isFinite(jsonBytes(value)) ? value : UNSHOWABLE;
  }
  return out;
}

/**
 * The JSON text of an answer. The fast path is one JSON.stringify; only when that fails (a stored document
 * deeper than the serialiser's stack) is each item rendered alone, so one bad row never fails a whole list.
 * `key` names the array of items in a collection body; without it the body is one item.
 */
export function renderJson(body: Record<string, unknown>, key?: string): string {
  try {
    return JSON.stringify(body);
  } catch {
    if (key === undefined) return JSON.stringify(showable(body));
    const items = Array.isArray(body[key]) ? (body[key] as unknown[]) : [];
    return JSON.stringify({
      ...body,
      [key]: items.map((item) => (Number.isFinite(jsonBytes(item)) ? item : showable(item))),
    });
  }
}
