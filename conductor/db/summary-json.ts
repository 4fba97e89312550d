import type { NodeSummaryField } from "./store.ts";

// declared beside the Store that returns it: store.ts imports nothing from here (no import cycle)
export type { SummaryJsonPage } from "./store.ts";

/**
 * The fields of each object, in order (Ironic's short list). uuid is first: the page's last uuid is read from
 * it. PostgreSQL's `nodes.list_json` generated column writes exactly these: change both together.
 */
export const SUMMARY_JSON_FIELDS = [
  "uuid",
  "instance_uuid",
  "maintenance",
  "power_state",
  "provision_state",
  "name",
] as const satisfies readonly NodeSummaryField[];

/**
 * SQLite: the expression of one row's object as compact JSON text, from the columns of `nodes`; `param` adds a
 * parameter and returns its placeholder. Links are `<linkBase>/v1/nodes/<uuid>` and `<linkBase>/nodes/<uuid>`.
 */
export function summaryObjectSql(linkBase: string, param: (value: string) => string): string {
  const pairs = SUMMARY_JSON_FIELDS.flatMap((field) => [
    `'${field}'`,
    field === "maintenance" ? `json(CASE ${field} WHEN 0 THEN 'false' ELSE 'true' END)` : field,
  ]);
  const link = (path: string, rel: string) =>
    `json_object('href', ${param(linkBase)} || '${path}' || uuid, 'rel', '${rel}')`;
  const links = `json_array(${link("/v1/nodes/", "self")}, ${link("/nodes/", "bookmark")})`;
  return `json_object(${pairs.join(", ")}, 'links', ${links})`;
}

/** PostgreSQL: the page's text from [uuid, list_json] rows, each stored object closed with its links. */
export function storedSummariesJson(rows: readonly (readonly [string, string])[], linkBase: string): Buffer {
  // the link prefixes escaped once, without their closing quote; the uuid's own quoting closes them
  const self = JSON.stringify(`${linkBase}/v1/nodes/`).slice(0, -1);
  const bookmark = JSON.stringify(`${linkBase}/nodes/`).slice(0, -1);
  return arrayOf(
    rows.map(([uuid, object]) => {
      const quoted = JSON.stringify(uuid).slice(1);
      return `${object},"links":[{"href":${self}${quoted},"rel":"self"},{"href":${bookmark}${quoted},"rel":"bookmark"}]}`;
    }),
  );
}

/**
 * `[a,b,…]` as bytes, written part by part. Never one page-sized string: V8 puts strings that large in its
 * large-object space, which only a full collection frees (a Buffer's bytes live outside the heap).
 */
function arrayOf(parts: readonly string[]): Buffer {
  let size = 2 + Math.max(0, parts.length - 1);
  for (const part of parts) size += Buffer.byteLength(part);
  const out = Buffer.allocUnsafe(size);
  let at = out.write("[", 0, "latin1");
  for (let i = 0; i < parts.length; i++) {
    if (i > 0) at += out.write(",", at, "latin1");
    at += out.write(parts[i]!, at, "utf8");
  }
  out.write("]", at, "latin1");
  return out;
}

const UUID_KEY = Buffer.from('{"uuid":"');

/** The uuid of the last object of a page built by summaryObjectSql (each object opens with its uuid). */
export function lastUuidOf(json: Buffer): string | null {
  // the key's quotes are bare only where JSON structure is: inside a string value they would be escaped
  const at = json.lastIndexOf(UUID_KEY);
  if (at < 0) return null;
  const start = at + UUID_KEY.length;
  const end = json.indexOf(0x22, start);
  return end < 0 ? null : json.toString("utf8", start, end);
}
