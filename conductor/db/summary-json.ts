import type { NodeSummaryField } from "./store.ts";

// declared beside the Store that returns it: store.ts imports nothing from here (no import cycle)
export type { SummaryJsonPage } from "./store.ts";

/**
 * The fields of each object, in order (Ironic's short list). uuid is first: the page's last uuid is read from
 * it. The `nodes.list_json` generated columns are written from them (a change needs a migration).
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
 * The SQL of one node's object (the fields, links aside, left open for them) from the columns of `nodes`: both
 * schemas keep it as the generated column `nodes.list_json`. `quote` writes a text column as a JSON string (or
 * null), `isTrue` tests a boolean column.
 */
export function listJsonSql(quote: (column: string) => string, isTrue: (column: string) => string): string {
  return SUMMARY_JSON_FIELDS.map((field, i) => {
    const value =
      field === "maintenance" ? `CASE WHEN ${isTrue(field)} THEN 'true' ELSE 'false' END` : quote(field);
    return `'${i === 0 ? "{" : ","}"${field}":' || ${value}`;
  }).join("\n    || ");
}

/**
 * SQLite: the SQL that closes a `list_json` object with its links (`<linkBase>/v1/nodes/<uuid>` and
 * `<linkBase>/nodes/<uuid>`); `param` adds a parameter and returns its placeholder.
 */
export function summaryLinksSql(linkBase: string, param: (value: string) => string): string {
  const link = (path: string, rel: string) =>
    `'{"href":' || json_quote(${param(linkBase + path)} || uuid) || ',"rel":"${rel}"}'`;
  return `',"links":[' || ${link("/v1/nodes/", "self")} || ',' || ${link("/nodes/", "bookmark")} || ']}'`;
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
export function arrayOf(parts: readonly string[]): Buffer {
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

/** The uuid of the last object of a page of `list_json` objects (each opens with its uuid). */
export function lastUuidOf(json: Buffer): string | null {
  // the key's quotes are bare only where JSON structure is: inside a string value they would be escaped
  const at = json.lastIndexOf(UUID_KEY);
  if (at < 0) return null;
  const start = at + UUID_KEY.length;
  const end = json.indexOf(0x22, start);
  return end < 0 ? null : json.toString("utf8", start, end);
}
