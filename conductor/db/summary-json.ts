import { NODE_SUMMARY_FIELDS, type NodeSummaryField } from "./store.ts";

/**
 * A page of short node views as JSON text, built by the database. At 1,000 rows a page, turning each column
 * value into a JavaScript value, building the view objects and stringifying them was most of a list request's
 * CPU; the database writes the same text in C (docs/cluster.md has the measurement).
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

/** Which database writes the text, and how a parameter is added (returns its placeholder). */
export interface JsonDialect {
  dialect: "sqlite" | "postgresql";
  param(value: string): string;
}

const BOOLEAN_FIELDS = new Set<NodeSummaryField>(["maintenance"]);

/**
 * The SQL expression of one row's object as compact JSON text, from the columns of `nodes`. SQLite's
 * json_object is its fastest way; PostgreSQL's json_build_object writes `"key" : value` with spaces, so there
 * the text is concatenated from to_json() of each value, which gives the same bytes as SQLite.
 */
export function summaryObjectSql(shape: SummaryJsonShape, sql: JsonDialect): string {
  if (shape.fields[0] !== "uuid") throw new Error("a summary JSON shape starts with uuid");
  for (const field of shape.fields) {
    // field names come from a closed list, never from a request: checked, then safe in SQL text
    if (!(NODE_SUMMARY_FIELDS as readonly string[]).includes(field))
      throw new Error(`not a column: ${field}`);
  }
  const self = sql.param(shape.linkBase);
  const bookmark = sql.param(shape.linkBase);
  if (sql.dialect === "sqlite") {
    const pairs = shape.fields.flatMap((field) => [
      `'${field}'`,
      BOOLEAN_FIELDS.has(field) ? `json(CASE ${field} WHEN 0 THEN 'false' ELSE 'true' END)` : field,
    ]);
    const link = (base: string, path: string, rel: string) =>
      `json_object('href', ${base} || '${path}' || uuid, 'rel', '${rel}')`;
    const links = `json_array(${link(self, "/v1/nodes/", "self")}, ${link(bookmark, "/nodes/", "bookmark")})`;
    return `json_object(${pairs.join(", ")}, 'links', ${links})`;
  }
  const value = (field: NodeSummaryField) =>
    BOOLEAN_FIELDS.has(field)
      ? `CASE WHEN ${field} THEN 'true' ELSE 'false' END`
      : `COALESCE(to_json(${field})::text, 'null')`;
  const members = shape.fields.map((field, i) => `'${i === 0 ? "{" : ","}"${field}":' || ${value(field)}`);
  const href = (base: string, path: string) => `to_json(${base}::text || '${path}' || uuid)::text`;
  members.push(
    `',"links":[{"href":' || ${href(self, "/v1/nodes/")} || ',"rel":"self"},{"href":' || ${href(bookmark, "/nodes/")} || ',"rel":"bookmark"}]}'`,
  );
  return members.join(" || ");
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
