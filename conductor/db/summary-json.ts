import { NODE_SUMMARY_FIELDS, type NodeSummaryField } from "./store.ts";

/**
 * A page of short node views as JSON text. At 1,000 rows a page, building a view object per row and
 * stringifying them was most of a list request's CPU. SQLite writes the text itself (json_object, in C, in
 * the conductor's process). PostgreSQL's JSON functions cost more than the rows (2.6 ms against 0.35 ms a
 * page), so there each node's default object is a generated column kept on write (storedSummariesJson adds
 * the links), and other field sets come as array rows that summaryRowsJson writes (docs/cluster.md).
 */
export interface SummaryJsonShape {
  /** The fields of each object, in this order; `uuid` must be first (the page's last uuid is read from it). */
  fields: readonly NodeSummaryField[];
  /** Links are `<linkBase>/v1/nodes/<uuid>` (self) and `<linkBase>/nodes/<uuid>` (bookmark). */
  linkBase: string;
}

export interface SummaryJsonPage {
  /** A JSON array of objects: the shape's fields, then `links`. */
  json: Buffer;
  count: number;
  /** The last object's uuid (the next page's marker), null on an empty page. */
  lastUuid: string | null;
}

/** Adds a parameter, returns its placeholder. */
export type AddParam = (value: string) => string;

const BOOLEAN_FIELDS = new Set<NodeSummaryField>(["maintenance"]);

/** Refuses a shape whose fields are not columns, or that does not start with uuid. */
export function checkSummaryShape(shape: SummaryJsonShape): void {
  if (shape.fields[0] !== "uuid") throw new Error("a summary JSON shape starts with uuid");
  for (const field of shape.fields) {
    // field names come from a closed list, never from a request: checked, then safe in SQL text
    if (!(NODE_SUMMARY_FIELDS as readonly string[]).includes(field))
      throw new Error(`not a column: ${field}`);
  }
}

/** SQLite: the expression of one row's object as compact JSON text, from the columns of `nodes`. */
export function summaryObjectSql(shape: SummaryJsonShape, param: AddParam): string {
  checkSummaryShape(shape);
  const pairs = shape.fields.flatMap((field) => [
    `'${field}'`,
    BOOLEAN_FIELDS.has(field) ? `json(CASE ${field} WHEN 0 THEN 'false' ELSE 'true' END)` : field,
  ]);
  const link = (path: string, rel: string) =>
    `json_object('href', ${param(shape.linkBase)} || '${path}' || uuid, 'rel', '${rel}')`;
  const links = `json_array(${link("/v1/nodes/", "self")}, ${link("/nodes/", "bookmark")})`;
  return `json_object(${pairs.join(", ")}, 'links', ${links})`;
}

/** The same text as summaryObjectSql's objects, joined into an array, from rows of the shape's columns. */
export function summaryRowsJson(rows: readonly (readonly unknown[])[], shape: SummaryJsonShape): Buffer {
  checkSummaryShape(shape);
  const { fields, linkBase } = shape;
  const booleans = fields.map((field) => BOOLEAN_FIELDS.has(field));
  // an object and JSON.stringify per row: V8's serializer beats building the text piece by piece
  const objects = rows.map((row) => {
    const object: Record<string, unknown> = {};
    for (let i = 0; i < fields.length; i++) {
      const value = row[i] ?? null;
      object[fields[i]!] = booleans[i] ? value === true || value === 1 : value;
    }
    object.links = [
      { href: `${linkBase}/v1/nodes/${String(row[0])}`, rel: "self" },
      { href: `${linkBase}/nodes/${String(row[0])}`, rel: "bookmark" },
    ];
    return JSON.stringify(object);
  });
  return arrayOf(objects);
}

/**
 * The fields of the object PostgreSQL keeps per node in `nodes.list_json` (its last migration), in order, the
 * closing brace left off so the links can follow.
 */
export const STORED_SUMMARY_FIELDS = [
  "uuid",
  "instance_uuid",
  "maintenance",
  "power_state",
  "provision_state",
  "name",
] as const satisfies readonly NodeSummaryField[];

/** Whether a shape asks for exactly the stored object's fields. */
export function isStoredSummaryShape(shape: SummaryJsonShape): boolean {
  return (
    shape.fields.length === STORED_SUMMARY_FIELDS.length &&
    shape.fields.every((field, i) => field === STORED_SUMMARY_FIELDS[i])
  );
}

/** The page's text from [uuid, stored object] rows: each object closed with its links. */
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
 * large-object space, which only a full collection frees, and those pauses were the list's p99 (a Buffer's
 * bytes live outside the heap).
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
