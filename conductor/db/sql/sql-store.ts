import type { NodeHistoryRecord } from "../../../shared/history.ts";
import type { DeployTemplateRecord } from "../../../shared/deploy-template.ts";
import type { ConductorRecord, NodeRecord } from "../../../shared/resources.ts";
import { isUuid } from "../../../shared/uuid.ts";
import { candidateQuery, matchColumns, TRAIT_BATCH, type CandidateRequest } from "../candidates.ts";
import {
  ConductorAlreadyRegistered,
  Duplicate,
  NODE_SORT_KEYS,
  NodeLocked,
  NodeNotFound,
  NotFound,
  summaryColumns,
  type DocumentMethods,
  type InternalInfoChanges,
  type NodeFilter,
  type NodeSummary,
  type NodeSummaryField,
  type OfNodeFilter,
  type Page,
  type ReservedNode,
  type ShardCount,
  type ShownNode,
  type Store,
  type StoredDocuments,
  type StoredToken,
} from "../store.ts";
import { SHOWN_FORM, shownColumns, storedCuts, unshowable } from "../node-shown.ts";
import { type RawFields, rawAscii, rawBytes, rawText } from "./raw-rows.ts";
import { lastUuidOf, storedSummariesJson, summaryLinksSql, type SummaryJsonPage } from "../summary-json.ts";
import { Params, type Dialect, type Executor, type SqlValue } from "./dialect.ts";
import * as tables from "./tables.ts";
import type { Doc, Table } from "./tables.ts";

type Row = Record<string, SqlValue | undefined>;
type Reservation = { ifReservedBy?: string | null };

/** One UPDATE of stored rows: columns set, and paths of the document set (to JSON values) or removed. */
interface Edit {
  columns: Row;
  set: [readonly string[], unknown][];
  remove: (readonly string[])[];
}

const now = (): string => new Date().toISOString();
const sortKey = (page: Page, keys: readonly string[]): string =>
  page.sortKey && keys.includes(page.sortKey) ? page.sortKey : "id";
const byIdent = (ident: string): Row => ({ [isUuid(ident) ? "uuid" : "name"]: ident });
/** The resource as Ironic's texts name it ("Volume connector"): its methods' name in words. */
const noun = (table: { methods: readonly [string, string] }): string =>
  table.methods[0].replace(/(?<=.)[A-Z]/g, (letter) => ` ${letter.toLowerCase()}`);

/** The node's fields kept as columns (with the matching columns and the document). */
const NODE_COLUMNS = [
  ...["uuid", "name", "driver", "provision_state", "power_state", "maintenance", "reservation"],
  ...["instance_uuid", "resource_class", "conductor_group", "owner", "lessee", "fault", "retired"],
  ...["created_at", "updated_at"],
] as const satisfies readonly (keyof NodeRecord)[];

/**
 * The detail page's rows: each node with its shown text (a rowid/primary-key lookup per node). The texts are
 * kept apart from the node rows so that every other read of the nodes scans rows half as wide.
 */
const SHOWN_JOIN = "nodes LEFT JOIN node_shown ON node_shown.node_id = nodes.id";
/** The detail page's columns, in the order shownNodesOf and shownNodesAsText read them. */
const SHOWN_COLUMNS = ["uuid", "conductor_group", "owner", "lessee", "shown", "shown_cuts"] as const;
/** A node's shown text replaces the one it has (INSERT … SELECT … WHERE: SQLite needs the WHERE before ON). */
const SHOWN_UPSERT =
  " ON CONFLICT (node_id) DO UPDATE SET shown = excluded.shown, shown_cuts = excluded.shown_cuts";

/** NodeFilter's keys that match a column's value (booleans as the dialect keeps them). */
const NODE_EQUAL = [
  ...["provision_state", "maintenance", "retired", "resource_class", "driver", "conductor_group"],
  ...["instance_uuid", "fault", "owner", "lessee", "reservation", "chassis_uuid", "parent_node"],
] as const satisfies readonly (keyof NodeFilter)[];

/** NodeFilter's keys that ask whether a column is set (true) or NULL (false). */
const NODE_SET = [
  ["sharded", "shard"],
  ["reserved", "reservation"],
  ["associated", "instance_uuid"],
] as const satisfies readonly (readonly [keyof NodeFilter, string])[];

/** `column = ?` for each key of `match` that has a value, parameters added in order. */
function equal(p: Params, match: Row): string[] {
  return Object.entries(match).flatMap(([column, value]) =>
    value === undefined ? [] : [`${column} = ${p.add(value)}`],
  );
}

/** `column IN (…)` for a list filter; an empty list matches nothing. */
function oneOf(p: Params, column: string, values: readonly string[]): string {
  return values.length ? `${column} IN (${values.map((value) => p.add(value)).join(", ")})` : "1 = 0";
}

/** `patch` as an Edit of the top-level document (undefined removes, as JSON.stringify drops it; uuid stays). */
function topLevelEdit(patch: Record<string, unknown>, columns: readonly string[]): Edit {
  const edit: Edit = { columns: {}, set: [], remove: [] };
  for (const [key, value] of Object.entries(patch)) {
    if (key === "uuid") continue;
    if (value === undefined) edit.remove.push([key]);
    else edit.set.push([[key], value]);
    if (columns.includes(key)) edit.columns[key] = (value ?? null) as SqlValue;
  }
  return edit;
}

/**
 * The Store over SQL, whatever the database (Ironic's db/sqlalchemy/api.py): every statement is written once
 * here; the Dialect supplies placeholders, locking, JSON functions and the schema's planner hints.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type, @typescript-eslint/no-unused-vars
export interface SqlStore<D extends Dialect = Dialect> extends StoredDocuments {}

// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging -- the document methods, bound below
export class SqlStore<D extends Dialect = Dialect> implements Store {
  constructor(protected readonly d: D) {
    const documents: StoredDocuments = {
      ...this.bind(tables.PORTS),
      ...this.bind(tables.PORTGROUPS),
      ...this.bind(tables.ALLOCATIONS),
      ...this.bind(tables.CHASSIS),
      ...this.bind(tables.VOLUME_CONNECTORS),
      ...this.bind(tables.VOLUME_TARGETS),
      ...this.bind(tables.DEPLOY_TEMPLATES),
      ...this.bind(tables.RUNBOOKS),
      ...this.bind(tables.INSPECTION_RULES),
    };
    Object.assign(this, documents);
  }

  private params(): Params {
    return new Params(this.d);
  }

  private async docs<T>(sql: string, values: readonly SqlValue[], db: Executor = this.d): Promise<T[]> {
    return (await db.all<{ doc: unknown }>(sql, values)).map((row) => this.d.doc<T>(row.doc));
  }

  /** The document of the one row of `table` that matches, or null. */
  private async docBy<T>(table: string, match: Row, options: { db?: Executor; lock?: string } = {}) {
    const p = this.params();
    const sql = `SELECT doc FROM ${table} WHERE ${equal(p, match).join(" AND ")}${options.lock ?? ""}`;
    return (await this.docs<T>(sql, p.values, options.db))[0] ?? null;
  }

  /** Deletes the rows of `table` that match; @throws `missing` when there was none */
  private async deleteBy(table: string, match: Row, missing?: Error): Promise<void> {
    const p = this.params();
    const changed = await this.d.run(`DELETE FROM ${table} WHERE ${equal(p, match).join(" AND ")}`, p.values);
    if (changed === 0 && missing) throw missing;
  }

  /** `INSERT INTO table … VALUES …` of `row`, then `tail` (an ON CONFLICT clause). */
  private async insert(table: string, row: Row, options: { db?: Executor; tail?: string } = {}) {
    const p = this.params();
    const values = Object.values(row).map((value) => p.add(value ?? null));
    const sql = `INSERT INTO ${table} (${Object.keys(row).join(",")}) VALUES (${values.join(",")})`;
    await (options.db ?? this.d).run(`${sql}${options.tail ?? ""}`, p.values);
  }

  /** The database's unique-constraint error as Duplicate (its message from the constraint's text), or as is. */
  private conflict(error: unknown, message: (detail: string) => string): unknown {
    const violation = this.d.violation(error);
    return violation?.kind === "unique" ? new Duplicate(message(violation.detail)) : error;
  }

  /**
   * `SELECT columns FROM table WHERE … ORDER BY … LIMIT …` with keyset paging: `(sort, id) > (marker's sort,
   * marker's id)`. Sort keys compare as text with '' for NULL, so the order is total and the same in both
   * databases (which put NULL at opposite ends). `conditions` hold parameters already added to `p`.
   */
  private select(
    table: string,
    columns: string,
    query: { conditions: string[]; p: Params; page: Page; keys?: readonly string[]; from?: string },
  ) {
    const { conditions, p, page } = query;
    const key = sortKey(
      page,
      query.keys ?? (table === "nodes" ? NODE_SORT_KEYS : ["id", "uuid", "address", "name", "state"]),
    );
    const dir = page.sortDir === "desc" ? "DESC" : "ASC";
    const expr = key === "id" ? "id" : `COALESCE(CAST(${key} AS TEXT), '')`;
    if (page.marker !== undefined) {
      const [row, marked] = key === "id" ? ["id", "id"] : [`(${expr}, id)`, `${expr}, id`];
      const cmp = dir === "DESC" ? "<" : ">";
      conditions.push(`${row} ${cmp} (SELECT ${marked} FROM ${table} WHERE uuid = ${p.add(page.marker)})`);
    }
    const order = key === "id" ? `id ${dir}` : `${expr} ${dir}, id ${dir}`;
    const where = conditions.length ? ` WHERE ${conditions.join(" AND ")}` : "";
    const limit = page.limit === undefined ? "" : ` LIMIT ${p.add(Math.trunc(page.limit))}`;
    const from = query.from ?? table;
    return { sql: `SELECT ${columns} FROM ${from}${where} ORDER BY ${order}${limit}`, order };
  }

  /**
   * A node list's SELECT; `columns` may add parameters (they come first in the text), or name a `from` that
   * joins another table to the nodes (whose column names must not clash with the nodes').
   */
  private nodeSelect(
    columns: ((p: Params) => string) | { list: string; from: string },
    filter: NodeFilter,
    page: Page,
  ) {
    const p = this.params();
    const { list, from } = typeof columns === "function" ? { list: columns(p), from: undefined } : columns;
    const match = NODE_EQUAL.map((key) => {
      const value = filter[key];
      return [key, typeof value === "boolean" ? this.d.bool(value) : value];
    });
    const conditions = equal(p, Object.fromEntries(match) as Row);
    if (filter.exclude_children === true) conditions.push(this.d.noChildren);
    if (filter.console_enabled === true) conditions.push(this.d.jsonIsTrue("doc", "console_enabled"));
    if (filter.project !== undefined) conditions.push(this.ofProject(p, filter.project));
    if (filter.shard !== undefined) conditions.push(oneOf(p, "shard", filter.shard));
    if (filter.description_contains !== undefined)
      conditions.push(
        this.d.contains(this.d.jsonText("doc", "description"), p.add(filter.description_contains)),
      );
    if (filter.instance_name !== undefined)
      conditions.push(`${this.d.jsonText("doc", "instance_name")} = ${p.add(filter.instance_name)}`);
    for (const [key, column] of NODE_SET) {
      if (filter[key] !== undefined) conditions.push(`${column} IS ${filter[key] ? "NOT " : ""}NULL`);
    }
    return { p, ...this.select("nodes", list, { conditions, p, page, from }) };
  }

  private ofProject(p: Params, project: string): string {
    const id = p.add(project);
    return `(owner = ${id} OR lessee = ${id})`;
  }

  private async writeNode(db: Executor, node: NodeRecord, insert: boolean): Promise<void> {
    const row: Row = Object.fromEntries(NODE_COLUMNS.map((column) => [column, node[column]]));
    Object.assign(row, matchColumns(node), { doc: JSON.stringify(node) });
    row.maintenance = this.d.bool(node.maintenance);
    row.retired = this.d.bool(node.retired);
    try {
      if (insert) {
        await this.insert("nodes", row, { db });
      } else {
        const p = this.params();
        const sets = equal(p, { ...row, uuid: undefined });
        await db.run(`UPDATE nodes SET ${sets.join(",")} WHERE uuid = ${p.add(node.uuid)}`, p.values);
        await db.run(`DELETE FROM node_traits WHERE node_uuid = ${this.d.placeholder(1)}`, [node.uuid]);
      }
      const { shown, shown_cuts } = shownColumns(node);
      const s = this.params();
      await db.run(
        `INSERT INTO node_shown (node_id, shown, shown_cuts)
         SELECT id, ${s.add(shown)}, ${s.add(shown_cuts)} FROM nodes WHERE uuid = ${s.add(node.uuid)}${SHOWN_UPSERT}`,
        s.values,
      );
      const traits = [...new Set(node.traits)];
      if (traits.length > 0) {
        const t = this.params();
        await db.run(
          `INSERT INTO node_traits (node_uuid, trait)
           SELECT CAST(${t.add(node.uuid)} AS TEXT), value FROM ${this.d.rows(t.add(this.d.list(traits)))}`,
          t.values,
        );
      }
    } catch (error) {
      throw this.conflict(error, (detail) => {
        if (detail.includes("instance_uuid"))
          return `Instance ${node.instance_uuid} is already associated with a node.`;
        if (detail.includes("name")) return `A node with name ${node.name} already exists.`;
        return `A node with UUID ${node.uuid} already exists.`;
      });
    }
  }

  /**
   * One UPDATE of the rows of `table` that `condition` picks (`prefix`, e.g. a WITH, comes before it in the
   * text and its parameters are in `p` already): the database edits the document in place; it is never read
   * and rewritten whole here. @returns the documents as written
   */
  private async edit<T>(
    table: string,
    edit: Edit,
    options: { where: Row | ((p: Params) => string); p?: Params; prefix?: string },
  ): Promise<T[]> {
    const { p = this.params(), where } = options;
    const nodes = table === "nodes";
    // a node's shown text is deleted with the edit by the database (trigger node_shown_stale: never stale),
    // then written from the document (keepShown)
    const sets = equal(p, edit.columns).map((set) => `${set}, `);
    let doc = "doc";
    for (const path of edit.remove) doc = this.d.jsonRemove(doc, p.add(this.d.path(path)));
    for (const [path, value] of edit.set) {
      doc = this.d.jsonSet(doc, p.add(this.d.path(path)), p.add(JSON.stringify(value)));
    }
    const sql = `${options.prefix ?? ""}UPDATE ${table} SET ${sets.join("")}doc = ${doc}
      WHERE ${typeof where === "function" ? where(p) : equal(p, where).join(" AND ")} RETURNING doc`;
    if (!nodes) return this.docs<T>(sql, p.values);
    const rows = await this.d.all<{ doc: unknown }>(sql, p.values);
    const docs = rows.map((row) => this.d.doc<T>(row.doc));
    await this.keepShown(rows.map((row, i) => [row.doc, docs[i] as unknown as NodeRecord]));
    return docs;
  }

  /**
   * Writes the shown text (node-shown.ts) of nodes just edited, each only while its document is still the one
   * it was made from (`stored`: as the database returned it): a later write has written its own.
   */
  private async keepShown(edited: readonly (readonly [unknown, NodeRecord | null])[]): Promise<number> {
    let changed = 0;
    for (const [stored, node] of edited) {
      // a document that is no node (stored before the schema's checks) is shown by the view path
      const { shown, shown_cuts } = node === null ? unshowable() : shownColumns(node);
      const p = this.params();
      const text = typeof stored === "string" ? stored : JSON.stringify(stored);
      const uuid =
        node?.uuid ?? (typeof stored === "object" ? (stored as { uuid?: unknown } | null)?.uuid : null);
      // NOTE: the node's row is locked (PostgreSQL) so that a write of it committed meanwhile is waited for and
      // its document compared again: its trigger cannot have run before this text is in
      const byUuid = uuid === undefined || uuid === null ? "" : `uuid = ${p.add(String(uuid))} AND `;
      changed += await this.d.run(
        `INSERT INTO node_shown (node_id, shown, shown_cuts)
         SELECT id, ${p.add(shown)}, ${p.add(shown_cuts)} FROM nodes
         WHERE ${byUuid}${this.d.sameDoc("doc", p.add(text))}${this.d.forUpdate}${SHOWN_UPSERT}`,
        p.values,
      );
    }
    return changed;
  }

  /**
   * Writes the shown text of every node that has none in this form (stored before the column, or by another
   * form of it), a batch at a time: run at start. Until then such a node's page is shown by the view path.
   * @returns how many rows were written
   */
  async fillShownTexts(batch = 500): Promise<number> {
    let filled = 0;
    for (;;) {
      const p = this.params();
      const rows = await this.d.all<{ doc: unknown }>(
        `SELECT doc FROM nodes LEFT JOIN node_shown ON node_id = id
         WHERE shown_cuts IS NULL OR shown_cuts NOT LIKE ${p.add(`${SHOWN_FORM}/%`)} LIMIT ${p.add(batch)}`,
        p.values,
      );
      const edited = rows.map((row): [unknown, NodeRecord | null] => {
        try {
          const node = this.d.doc<NodeRecord | null>(row.doc);
          return [row.doc, typeof node === "object" && node !== null ? node : null];
        } catch {
          return [row.doc, null];
        }
      });
      const changed = await this.keepShown(edited);
      filled += changed;
      // a batch that wrote nothing (every row rewritten meanwhile, or none left) ends the walk
      if (rows.length < batch || changed === 0) return filled;
    }
  }

  async listNodeShown<T>(
    filter: NodeFilter,
    page: Page,
    use: (rows: readonly ShownNode[] | null) => T,
  ): Promise<T> {
    const list = SHOWN_COLUMNS.join(", ");
    const { sql, p } = this.nodeSelect({ list, from: SHOWN_JOIN }, filter, page);
    const raw = await this.d.rawRows?.(sql, p.values, SHOWN_COLUMNS.length);
    if (raw) {
      try {
        return use(shownNodesOf(raw));
      } finally {
        raw.release();
      }
    }
    return use(await this.shownNodesAsText(sql, p.values));
  }

  private async shownNodesAsText(sql: string, values: readonly SqlValue[]): Promise<ShownNode[] | null> {
    type ShownRow = [string, string, string | null, string | null, string | null, string | null];
    const rows = await this.d.all<ShownRow>(sql, values, { raw: true });
    const nodes: ShownNode[] = [];
    for (const [uuid, conductor_group, owner, lessee, shown, shownCuts] of rows) {
      const cuts = storedCuts(shown, shownCuts);
      if (cuts === null || shown === null) return null;
      nodes.push({ uuid, conductor_group, owner, lessee, shown, cuts });
    }
    return nodes;
  }

  /** Edits one node, only while its reservation is `ifReservedBy` when that is given. */
  private async editNode(uuid: string, edit: Edit, options: Reservation = {}): Promise<NodeRecord> {
    const holder = options.ifReservedBy;
    const guard = (p: Params) =>
      holder === undefined ? "" : ` AND reservation ${holder === null ? "IS NULL" : `= ${p.add(holder)}`}`;
    const [node] = await this.edit<NodeRecord>("nodes", edit, {
      where: (p) => `uuid = ${p.add(uuid)}${guard(p)}`,
    });
    if (node) return node;
    const current = await this.getNode(uuid);
    if (!current || current.uuid !== uuid) throw new NodeNotFound(uuid);
    throw new NodeLocked(current.uuid, current.reservation);
  }

  /** Writes every node again, so columns derived from the documents are filled (after a migration). */
  protected async rewriteNodes(): Promise<void> {
    await this.d.transaction(async (db) => {
      for (const node of await this.docs<NodeRecord>("SELECT doc FROM nodes", [], db)) {
        await this.writeNode(db, node, false);
      }
    });
  }

  async createNode(node: NodeRecord, history?: NodeHistoryRecord): Promise<NodeRecord> {
    await this.d.grouped(async (db) => {
      await this.writeNode(db, node, true);
      if (history !== undefined) await this.insertHistory(db, history);
    });
    return node;
  }

  readonly getNode = (ident: string) => this.docBy<NodeRecord>("nodes", byIdent(ident));

  async listNodes(filter: NodeFilter, page: Page): Promise<NodeRecord[]> {
    const { sql, p } = this.nodeSelect(() => "doc", filter, page);
    return this.docs<NodeRecord>(sql, p.values);
  }

  async listNodeSummaries<F extends NodeSummaryField = NodeSummaryField>(
    filter: NodeFilter,
    page: Page,
    columns?: readonly F[],
  ): Promise<Pick<NodeSummary, F | "uuid">[]> {
    const names = summaryColumns(columns);
    const { sql, p } = this.nodeSelect(() => names.join(","), filter, page);
    // Rows as arrays: building a keyed object per row in the driver is much slower than here.
    const rows = await this.d.all<SqlValue[]>(sql, p.values, { raw: true });
    const maintenance = names.indexOf("maintenance");
    return rows.map((row) => {
      const node: Record<string, unknown> = {};
      for (let i = 0; i < names.length; i++) node[names[i] as string] = row[i];
      if (maintenance >= 0) node.maintenance = row[maintenance] === true || row[maintenance] === 1;
      return node as Pick<NodeSummary, F | "uuid">;
    });
  }

  async listNodeSummaryJson(filter: NodeFilter, page: Page, linkBase: string): Promise<SummaryJsonPage> {
    if (!this.d.joinsPages) {
      // each node's object is kept by the database (nodes.list_json): two values a row, no JSON written here
      const { sql, p } = this.nodeSelect(() => "uuid, list_json", filter, page);
      const rows = await this.d.all<[string, string]>(sql, p.values, { raw: true });
      const json = storedSummariesJson(rows, linkBase);
      return { json, count: rows.length, lastUuid: rows.at(-1)?.[0] ?? null };
    }
    const key = sortKey(page, NODE_SORT_KEYS);
    const sort = key === "id" ? "" : `, ${key}`;
    const links = (p: Params) => summaryLinksSql(linkBase, (v) => p.add(v));
    const { sql, p, order } = this.nodeSelect(
      (p) => `list_json || ${links(p)} AS obj, id${sort}`,
      filter,
      page,
    );
    // The subquery pages; the aggregate joins its objects in the same order (named, as an aggregate's order is
    // otherwise unspecified). The text comes back as bytes: no JavaScript string is made of it.
    const [row] = await this.d.all<[Buffer, number]>(
      `SELECT CAST('[' || COALESCE(group_concat(obj, ',' ORDER BY ${order}), '') || ']' AS BLOB), count(*)
       FROM (${sql})`,
      p.values,
      { raw: true },
    );
    const [json, count] = row ?? [Buffer.from("[]"), 0];
    return { json, count, lastUuid: lastUuidOf(json) };
  }

  async listOrphanedBoots(options: {
    waitStates: readonly string[];
    live: readonly string[];
  }): Promise<NodeRecord[]> {
    const p = this.params();
    const notLive = (column: string) =>
      `${column} IS NOT NULL AND NOT (${this.d.inList(column, p.add(this.d.list(options.live)))})`;
    return this.docs<NodeRecord>(
      `SELECT doc FROM nodes${this.d.indexedBy("nodes_ramdisk_prepared_by")}
         WHERE ${notLive("ramdisk_prepared_by")}
           AND ${this.d.inList("provision_state", p.add(this.d.list(options.waitStates)))}
       UNION ALL
       SELECT doc FROM nodes${this.d.indexedBy("nodes_instance_prepared_by")}
         WHERE ${notLive("instance_prepared_by")} AND provision_state = 'active'`,
      p.values,
    );
  }

  async listShards(): Promise<ShardCount[]> {
    const rows = await this.d.all<{ shard: string | null; n: number | string }>(
      "SELECT shard, COUNT(*) AS n FROM nodes GROUP BY shard",
      [],
    );
    return rows
      .map((r) => ({ name: r.shard ?? "None", count: Number(r.n) }))
      .sort((a, b) => b.count - a.count || a.name.localeCompare(b.name));
  }

  readonly countNodesByState = () => this.countNodesBy("provision_state");

  async countNodesBy(column: "provision_state" | "power_state" | "fault"): Promise<Record<string, number>> {
    // the column comes from a closed union, never from a request
    const rows = await this.d.all<{ value: string; n: number | string }>(
      `SELECT COALESCE(${column}, 'none') AS value, COUNT(*) AS n FROM nodes GROUP BY ${column}`,
      [],
    );
    return Object.fromEntries(rows.map((r) => [r.value, Number(r.n)]));
  }

  updateNode(uuid: string, patch: Partial<NodeRecord>, options: Reservation = {}): Promise<NodeRecord> {
    return this.d.transaction(async (db) => {
      const node = await this.docBy<NodeRecord>("nodes", byIdent(uuid), { db, lock: this.d.forUpdate });
      if (!node) throw new NodeNotFound(uuid);
      if (options.ifReservedBy !== undefined && node.reservation !== options.ifReservedBy) {
        throw new NodeLocked(node.uuid, node.reservation);
      }
      const updated: NodeRecord = { ...node, ...patch, uuid: node.uuid, updated_at: now() };
      await this.writeNode(db, updated, false);
      return updated;
    });
  }

  updateDriverInternalInfo(uuid: string, changes: InternalInfoChanges, options?: Reservation) {
    const at = now();
    const edit: Edit = { columns: { updated_at: at }, set: [[["updated_at"], at]], remove: [] };
    for (const [key, value] of Object.entries(changes)) {
      if (value === undefined) edit.remove.push(["driver_internal_info", key]);
      else edit.set.push([["driver_internal_info", key], value]);
    }
    return this.editNode(uuid, edit, options);
  }

  readonly setDeployProgress = (uuid: string, progress: unknown, options?: Reservation) =>
    this.updateDriverInternalInfo(uuid, { deploy_progress: progress ?? undefined }, options);
  readonly deleteNode = (uuid: string) => this.deleteBy("nodes", { uuid }, new NodeNotFound(uuid));

  /** One statement: the row lock makes the test-and-set atomic without a round trip per step. */
  reserveNode(uuid: string, holder: string): Promise<NodeRecord> {
    const edit = topLevelEdit({ reservation: holder }, ["reservation"]);
    return this.editNode(uuid, edit, { ifReservedBy: null });
  }

  readonly releaseNode = async (uuid: string, holder: string) =>
    void (await this.releaseAll({ uuid, reservation: holder }));
  readonly releaseAllReservations = (holder: string) => this.releaseAll({ reservation: holder });

  private async releaseAll(where: Row): Promise<string[]> {
    const edit = topLevelEdit({ reservation: null }, ["reservation"]);
    return (await this.edit<NodeRecord>("nodes", edit, { where })).map((node) => node.uuid);
  }

  async listReservedBy(holders: readonly string[]): Promise<ReservedNode[]> {
    if (holders.length === 0) return [];
    const p = this.params();
    const held = this.d.inList("reservation", p.add(this.d.list(holders)));
    return this.d.all<ReservedNode>(
      `SELECT uuid, reservation, conductor_group FROM nodes WHERE ${held}`,
      p.values,
    );
  }

  async getAgentToken(uuid: string): Promise<{ digest: string; bootId: string } | null> {
    const [row] = await this.d.all<{ digest: string; boot_id: string }>(
      `SELECT digest, boot_id FROM agent_tokens WHERE node_uuid = ${this.d.placeholder(1)}`,
      [uuid],
    );
    return row ? { digest: row.digest, bootId: row.boot_id } : null;
  }

  async setAgentToken(uuid: string, record: { digest: string; bootId: string } | null): Promise<void> {
    if (record === null) return this.deleteBy("agent_tokens", { node_uuid: uuid });
    const row = { node_uuid: uuid, digest: record.digest, boot_id: record.bootId };
    const tail =
      " ON CONFLICT (node_uuid) DO UPDATE SET digest = excluded.digest, boot_id = excluded.boot_id";
    await this.insert("agent_tokens", row, { tail });
  }

  async sharedSecret(name: string, candidate: string): Promise<string> {
    const row = { name, value: candidate, created_at: new Date().toISOString() };
    await this.insert("shared_secrets", row, { tail: " ON CONFLICT (name) DO NOTHING" });
    const [stored] = await this.d.all<{ value: string }>(
      `SELECT value FROM shared_secrets WHERE name = ${this.d.placeholder(1)}`,
      [name],
    );
    if (!stored) throw new Error(`shared secret ${name} vanished while it was being read`);
    return stored.value;
  }

  async saveInventory(uuid: string, inventory: unknown): Promise<void> {
    const tail = " ON CONFLICT (node_uuid) DO UPDATE SET doc = excluded.doc";
    await this.insert("inventories", { node_uuid: uuid, doc: JSON.stringify(inventory) }, { tail });
  }

  readonly getInventory = (uuid: string) => this.docBy<unknown>("inventories", { node_uuid: uuid });

  /** A table's Store methods (DocumentMethods): the generic create, get, list, update and delete below. */
  private bind<T extends Doc, F extends object | null, One extends string, Many extends string>(
    table: Table<T, F, One, Many>,
  ): DocumentMethods<T, F, One, Many> {
    const [one, many] = table.methods;
    const methods = {
      [`create${one}`]: (record: T) => this.create(table, record),
      [`get${one}`]: (ident: string) =>
        this.docBy<T>(table.name, table.named ? byIdent(ident) : { uuid: ident }),
      // a list without a filter (F null) takes only its page
      [`list${many}`]: (...args: [F, Page] | [Page]) =>
        args.length === 2 ? this.list(table, args[0], args[1]) : this.list(table, null, args[0]),
      [`update${one}`]: (ident: string, patch: Partial<T>) => this.update(table, ident, patch),
      [`delete${one}`]: (uuid: string) => this.remove(table, uuid),
    };
    return methods as DocumentMethods<T, F, One, Many>;
  }

  /** Inserts a resource's document with its mirrored columns. @throws NodeNotFound, Duplicate */
  private async create<T extends Doc, F>(table: Table<T, F>, record: T): Promise<T> {
    const row: Row = Object.fromEntries(table.columns.map((column) => [column, record[column] as SqlValue]));
    await this.insert(table.name, { ...row, doc: JSON.stringify(record) }).catch((error: unknown) => {
      throw this.refused(table, error, record);
    });
    return record;
  }

  /** A page of a resource, filtered by equality (and, for a node's children, by the project of the node). */
  private list<T extends Doc, F>(table: Table<T, F>, filter: F | null, page: Page) {
    const p = this.params();
    const columns: readonly string[] = table.columns;
    const by = (filter ?? {}) as Partial<Record<string, SqlValue>> &
      OfNodeFilter & { project?: string; description_contains?: string };
    const match = (table.filters ?? []).map((key) => [
      columns.includes(key) ? key : this.d.jsonText("doc", key),
      by[key],
    ]);
    const conditions = equal(p, Object.fromEntries(match) as Row);
    if (table.ofNode) {
      const ofNode = [
        ...(by.project === undefined ? [] : [this.ofProject(p, by.project)]),
        ...(by.shard === undefined ? [] : [oneOf(p, "shard", by.shard)]),
        ...(by.conductor_groups === undefined ? [] : [oneOf(p, "conductor_group", by.conductor_groups)]),
      ];
      if (ofNode.length)
        conditions.push(`node_uuid IN (SELECT uuid FROM nodes WHERE ${ofNode.join(" AND ")})`);
    }
    if (by.description_contains !== undefined)
      conditions.push(this.d.contains(this.d.jsonText("doc", "description"), p.add(by.description_contains)));
    if (table.ownedOrPublic && by.project !== undefined) {
      conditions.push(`(owner = ${p.add(by.project)} OR ${this.d.jsonIsTrue("doc", "public")})`);
    }
    const { sql } = this.select(table.name, "doc", { conditions, p, page, keys: table.sortKeys });
    return this.docs<T>(sql, p.values);
  }

  /**
   * One statement (one round trip, no BEGIN/COMMIT): the row lock of the UPDATE serialises writers, and the
   * mirrored columns are set from the same patch as the document. @throws NotFound, NodeNotFound, Duplicate
   */
  private async update<T extends Doc, F>(table: Table<T, F>, ident: string, patch: Partial<T>): Promise<T> {
    const columns = table.columns.filter((column) => column !== "created_at");
    const edit = topLevelEdit({ ...patch, updated_at: now() }, columns);
    const where = table.named ? byIdent(ident) : { uuid: ident };
    const [updated] = await this.edit<T>(table.name, edit, { where }).catch((error: unknown) => {
      throw this.refused(table, error, { uuid: ident, ...patch });
    });
    if (!updated) throw new NotFound(`${noun(table)} ${ident} could not be found.`);
    return updated;
  }

  /** In one statement, so a row that comes to hold it (heldBy) meanwhile is seen here or refused by its write. */
  private async remove<T extends Doc, F>(table: Table<T, F>, uuid: string): Promise<void> {
    const p = this.params();
    const id = p.add(uuid);
    const { heldBy: held } = table;
    const free = held ? ` AND NOT EXISTS (SELECT 1 FROM ${held.table} WHERE ${held.column} = ${id})` : "";
    if ((await this.d.run(`DELETE FROM ${table.name} WHERE uuid = ${id}${free}`, p.values)) > 0) return;
    if (held && (await this.docBy(table.name, { uuid }))) throw held.error(uuid);
    throw new NotFound(`${noun(table)} ${uuid} could not be found.`);
  }

  /** A write's constraint error in Ironic's words: the node is gone, or a unique column's value is taken. */
  private refused<T extends Doc, F>(table: Table<T, F>, error: unknown, record: Partial<T>): unknown {
    if (table.ofNode && this.d.violation(error)?.kind === "foreign") {
      return new NodeNotFound("node_uuid" in record ? String(record.node_uuid) : "");
    }
    const what = noun(table);
    const a = /^[AEIOU]/.test(what) ? "An" : "A";
    return this.conflict(error, (detail) => {
      const taken = table.unique?.find(([constraint]) => detail.includes(constraint))?.[1](record);
      return `${a} ${what.toLowerCase()} with ${taken ?? `UUID ${record.uuid}`} already exists.`;
    });
  }

  async listDeployTemplatesByNames(names: readonly string[]): Promise<DeployTemplateRecord[]> {
    if (names.length === 0) return [];
    const p = this.params();
    const named = this.d.inList("name", p.add(this.d.list([...new Set(names)])));
    return this.docs<DeployTemplateRecord>(
      `SELECT doc FROM deploy_templates WHERE ${named} ORDER BY name, id`,
      p.values,
    );
  }

  async claimNode(allocationUuid: string, request: CandidateRequest): Promise<NodeRecord | null> {
    const at = now();
    const changes = { instance_uuid: allocationUuid, allocation_uuid: allocationUuid, updated_at: at };
    const edit = topLevelEdit(changes, ["instance_uuid", "updated_at"]);
    // One statement, so one round trip and no BEGIN/COMMIT: the CTE picks (and, in PostgreSQL, locks) the row
    // and the UPDATE writes only what a claim changes (traits and matching columns are untouched). A row
    // another claim holds is skipped, not waited for, so racing clients never queue behind each other.
    const claim = async (batch: number | null) => {
      const { false: no, traitRows } = this.d;
      const p = this.params();
      const query = candidateQuery(request, { param: (v) => p.add(v), false: no, traitRows });
      const prefix = `WITH chosen AS (${this.d.claimSelect(query, batch)}) `;
      const where = () => "id IN (SELECT id FROM chosen)";
      const [node] = await this.edit<NodeRecord>("nodes", edit, { where, p, prefix });
      return { node: node ?? null, walked: query.traitWalk !== null };
    };
    try {
      // NOTE: a trait's first rows can all be held by racing claims or reserved (the mirror leaves reservations
      // out); only then are all of its claimable rows read, so a claim never misses a node that is free
      const first = await claim(TRAIT_BATCH);
      return first.node !== null || !first.walked ? first.node : (await claim(null)).node;
    } catch (error) {
      throw this.conflict(error, () => `Instance ${allocationUuid} is already associated with a node.`);
    }
  }

  registerConductor(
    record: ConductorRecord,
    options: { staleBefore: number; retire: readonly string[] },
  ): Promise<void> {
    const { true: yes, false: no } = this.d;
    return this.d.transaction(async (db) => {
      const p = this.params();
      const host = `hostname = ${p.add(record.hostname)} AND online = ${yes}`;
      const stale = `heartbeat_at < ${p.add(options.staleBefore)}`;
      const retired = this.d.inList("identity", p.add(this.d.list(options.retire)));
      await db.run(
        `UPDATE conductors SET online = ${no} WHERE ${host} AND (${stale} OR ${retired})`,
        p.values,
      );
      const row = { ...record, drivers: JSON.stringify(record.drivers), online: this.d.bool(true) };
      await this.insert("conductors", row, { db }).catch((error: unknown) => {
        throw this.d.violation(error)?.kind === "unique"
          ? new ConductorAlreadyRegistered(record.hostname)
          : error;
      });
    });
  }

  async pruneConductors(identities: readonly string[]): Promise<string[]> {
    if (identities.length === 0) return [];
    const p = this.params();
    const rows = await this.d.all<{ identity: string }>(
      `DELETE FROM conductors AS c
        WHERE ${this.d.inList("c.identity", p.add(this.d.list(identities)))}
          AND EXISTS (SELECT 1 FROM conductors newer WHERE newer.hostname = c.hostname
                        AND (newer.created_at, newer.identity) > (c.created_at, c.identity))
          AND NOT EXISTS (SELECT 1 FROM nodes WHERE nodes.reservation = c.identity)
        RETURNING identity`,
      p.values,
    );
    return rows.map((r) => r.identity);
  }

  async touchConductor(identity: string, at: number, url?: string): Promise<boolean> {
    const p = this.params();
    const changed = await this.d.run(
      `UPDATE conductors SET heartbeat_at = ${p.add(at)}, url = COALESCE(${p.add(url ?? null)}, url)
       WHERE identity = ${p.add(identity)} AND online = ${this.d.true}`,
      p.values,
    );
    return changed > 0;
  }

  async retireConductor(identity: string): Promise<void> {
    const sql = `UPDATE conductors SET online = ${this.d.false} WHERE identity = ${this.d.placeholder(1)}`;
    await this.d.run(sql, [identity]);
  }

  async listConductors(): Promise<ConductorRecord[]> {
    type Stored = Omit<ConductorRecord, "drivers" | "online" | "heartbeat_at"> & Record<string, unknown>;
    const rows = await this.d.all<Stored>("SELECT * FROM conductors ORDER BY created_at, identity", []);
    // BIGINT arrives from PostgreSQL as a string (it may exceed 2^53; epoch milliseconds do not)
    return rows.map((r) => ({
      ...r,
      drivers: this.d.doc<string[]>(r.drivers),
      online: r.online === true || r.online === 1,
      heartbeat_at: Number(r.heartbeat_at),
    }));
  }

  async addNodeHistory(entry: NodeHistoryRecord): Promise<void> {
    await this.d.grouped((db) => this.insertHistory(db, entry));
  }

  private insertHistory(db: Executor, entry: NodeHistoryRecord): Promise<void> {
    const { uuid, node_uuid, created_at } = entry;
    return this.insert("node_history", { uuid, node_uuid, created_at, doc: JSON.stringify(entry) }, { db });
  }

  listNodeHistory(nodeUuid: string, page: { limit?: number; marker?: string }): Promise<NodeHistoryRecord[]> {
    const p = this.params();
    let sql = `SELECT doc FROM node_history WHERE node_uuid = ${p.add(nodeUuid)}`;
    if (page.marker !== undefined) {
      sql += ` AND (created_at, id) > (SELECT created_at, id FROM node_history WHERE uuid = ${p.add(page.marker)}
        UNION ALL SELECT '', -1 LIMIT 1)`;
    }
    sql += " ORDER BY created_at, id";
    if (page.limit !== undefined) sql += ` LIMIT ${p.add(page.limit)}`;
    return this.docs<NodeHistoryRecord>(sql, p.values);
  }

  readonly getNodeHistory = (nodeUuid: string, eventUuid: string) =>
    this.docBy<NodeHistoryRecord>("node_history", { node_uuid: nodeUuid, uuid: eventUuid });

  async insertToken(token: StoredToken, options: { now: string; maxPerUser: number }): Promise<boolean> {
    return this.d.transaction(async (db) => {
      const p = this.params();
      await db.run(
        `DELETE FROM tokens WHERE expires_at <= ${p.add(options.now)} OR revoked = ${this.d.true}`,
        p.values,
      );
      const q = this.params();
      const [held] = await db.all<{ n: number | string }>(
        `SELECT COUNT(*) AS n FROM tokens WHERE user_name = ${q.add(token.user)}`,
        q.values,
      );
      if (Number(held?.n ?? 0) >= options.maxPerUser) return false;
      const { user, revoked, ...rest } = token;
      await this.insert("tokens", { ...rest, user_name: user, revoked: this.d.bool(revoked) }, { db });
      return true;
    });
  }

  readonly tokenByDigest = async (digest: string) => (await this.tokens("digest", digest))[0] ?? null;
  readonly tokenById = async (id: string) => (await this.tokens("id", id))[0] ?? null;
  readonly listTokens = (now: string) => this.tokens("live", now);

  async revokeToken(id: string): Promise<boolean> {
    const p = this.params();
    const sql = `UPDATE tokens SET revoked = ${this.d.true} WHERE id = ${p.add(id)} AND revoked = ${this.d.false}`;
    return (await this.d.run(sql, p.values)) > 0;
  }

  private async tokens(by: "digest" | "id" | "live", value: string): Promise<StoredToken[]> {
    const p = this.params();
    const where =
      by === "live"
        ? `revoked = ${this.d.false} AND expires_at > ${p.add(value)} ORDER BY created_at, id`
        : `${by} = ${p.add(value)}`;
    type Row = Omit<StoredToken, "user" | "revoked"> & { user_name: string; revoked: unknown };
    const rows = await this.d.all<Row>(
      `SELECT id, digest, user_name, fingerprint, created_at, expires_at, revoked FROM tokens WHERE ${where}`,
      p.values,
    );
    return rows.map(({ user_name, revoked, ...rest }) => ({
      ...rest,
      user: user_name,
      revoked: revoked === true || revoked === 1,
    }));
  }

  readonly close = () => this.d.close();
}

/**
 * listNodeShown's rows (uuid, conductor_group, owner, lessee, shown, shown_cuts) read as bytes: each shown
 * text stays the bytes the database sent (a view, copied once into the page), or null as listNodeShown.
 */
function shownNodesOf(raw: RawFields): ShownNode[] | null {
  const nodes = new Array<ShownNode>(raw.rows);
  for (let r = 0; r < raw.rows; r++) {
    const shown = rawBytes(raw, r, 4);
    // the cuts are ASCII by their form; a byte above it reads as no digit, and the row takes the view path
    const cuts = storedCuts(shown === null ? null : "", rawAscii(raw, r, 5));
    if (cuts === null || shown === null) return null;
    nodes[r] = {
      uuid: rawText(raw, r, 0)!,
      conductor_group: rawText(raw, r, 1)!,
      owner: rawText(raw, r, 2),
      lessee: rawText(raw, r, 3),
      shown,
      cuts,
    };
  }
  return nodes;
}
