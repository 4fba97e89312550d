import type { NodeHistoryRecord } from "../../../shared/history.ts";
import type { AllocationRecord, ConductorRecord, NodeRecord, PortRecord } from "../../../shared/resources.ts";
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
  type AllocationFilter,
  type InternalInfoChanges,
  type NodeFilter,
  type NodeSummary,
  type NodeSummaryField,
  type Page,
  type PortFilter,
  type ReservedNode,
  type Store,
} from "../store.ts";
import { lastUuidOf, storedSummariesJson, summaryLinksSql, type SummaryJsonPage } from "../summary-json.ts";
import { Params, type Dialect, type Executor, type SqlValue } from "./dialect.ts";

type DocRow = { doc: unknown };
type Reservation = { ifReservedBy?: string | null };

/** One UPDATE of stored rows: columns set, and paths of the document set (to JSON values) or removed. */
interface Edit {
  columns: Record<string, SqlValue>;
  set: [readonly string[], unknown][];
  remove?: (readonly string[])[];
}

const now = (): string => new Date().toISOString();
const where = (conditions: readonly string[]): string =>
  conditions.length ? ` WHERE ${conditions.join(" AND ")}` : "";
const sortKey = (page: Page, keys: readonly string[]): string =>
  page.sortKey && keys.includes(page.sortKey) ? page.sortKey : "id";
const identColumn = (ident: string): string => (isUuid(ident) ? "uuid" : "name");

/** Keys of `patch` as an Edit of the top-level document: undefined removes (as JSON.stringify drops it). */
function topLevelEdit(patch: Record<string, unknown>, columns: readonly string[]): Edit {
  const edit: Required<Edit> = { columns: {}, set: [], remove: [] };
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) edit.remove.push([key]);
    else edit.set.push([[key], value]);
    if (columns.includes(key)) edit.columns[key] = (value ?? null) as SqlValue;
  }
  return edit;
}

/**
 * The Store over SQL, whatever the database: every statement is written once here, and the Dialect supplies
 * placeholders, locking, JSON functions and the schema's planner hints.
 */
export class SqlStore<D extends Dialect = Dialect> implements Store {
  constructor(protected readonly d: D) {}

  private params(): Params {
    return new Params(this.d);
  }

  private async docs<T>(sql: string, values: readonly SqlValue[], db: Executor = this.d): Promise<T[]> {
    return (await db.all<DocRow>(sql, values)).map((row) => this.d.doc<T>(row.doc));
  }

  private async first<T>(sql: string, values: readonly SqlValue[], db: Executor = this.d): Promise<T | null> {
    return (await this.docs<T>(sql, values, db))[0] ?? null;
  }

  /**
   * `SELECT columns FROM table WHERE … ORDER BY … LIMIT …` with keyset paging: `(sort, id) > (marker's sort,
   * marker's id)`. Sort keys compare as text with '' for NULL, so the order is total and the same in both
   * databases (which sort NULL at opposite ends). `conditions` hold parameters already added to `p`.
   */
  private select(
    table: string,
    columns: string,
    query: { conditions: string[]; p: Params; page: Page; keys: readonly string[] },
  ): { sql: string; order: string; key: string } {
    const { conditions, p, page } = query;
    const key = sortKey(page, query.keys);
    const dir = page.sortDir === "desc" ? "DESC" : "ASC";
    const expr = key === "id" ? "id" : `COALESCE(CAST(${key} AS TEXT), '')`;
    if (page.marker !== undefined) {
      const marked = key === "id" ? "id" : `${expr}, id`;
      const cmp = dir === "DESC" ? "<" : ">";
      const row = key === "id" ? "id" : `(${marked})`;
      conditions.push(`${row} ${cmp} (SELECT ${marked} FROM ${table} WHERE uuid = ${p.add(page.marker)})`);
    }
    const order = key === "id" ? `id ${dir}` : `${expr} ${dir}, id ${dir}`;
    const limit = page.limit === undefined ? "" : ` LIMIT ${p.add(Math.trunc(page.limit))}`;
    return {
      sql: `SELECT ${columns} FROM ${table}${where(conditions)} ORDER BY ${order}${limit}`,
      order,
      key,
    };
  }

  private nodeConditions(filter: NodeFilter, p: Params): string[] {
    const conditions: string[] = [];
    const eq = (column: string, value: SqlValue | undefined): void => {
      if (value !== undefined) conditions.push(`${column} = ${p.add(value)}`);
    };
    const bool = (value: boolean | undefined) => (value === undefined ? undefined : this.d.bool(value));
    eq("provision_state", filter.provision_state);
    eq("maintenance", bool(filter.maintenance));
    eq("retired", bool(filter.retired));
    for (const column of ["resource_class", "driver", "conductor_group", "instance_uuid"] as const) {
      eq(column, filter[column]);
    }
    for (const column of ["fault", "owner", "lessee", "reservation"] as const) eq(column, filter[column]);
    if (filter.project !== undefined) {
      conditions.push(`(owner = ${p.add(filter.project)} OR lessee = ${p.add(filter.project)})`);
    }
    if (filter.reserved !== undefined) conditions.push(`reservation IS ${filter.reserved ? "NOT " : ""}NULL`);
    if (filter.associated !== undefined) {
      conditions.push(`instance_uuid IS ${filter.associated ? "NOT " : ""}NULL`);
    }
    return conditions;
  }

  /** A node list's SELECT; `columns` may add parameters (they come first in the text). */
  private nodeSelect(columns: (p: Params) => string, filter: NodeFilter, page: Page) {
    const p = this.params();
    const list = columns(p);
    const conditions = this.nodeConditions(filter, p);
    return { p, ...this.select("nodes", list, { conditions, p, page, keys: NODE_SORT_KEYS }) };
  }

  private nodeColumns(node: NodeRecord): Record<string, SqlValue> {
    return {
      uuid: node.uuid,
      name: node.name,
      driver: node.driver,
      provision_state: node.provision_state,
      power_state: node.power_state,
      maintenance: this.d.bool(node.maintenance),
      reservation: node.reservation,
      instance_uuid: node.instance_uuid,
      resource_class: node.resource_class,
      conductor_group: node.conductor_group,
      owner: node.owner,
      lessee: node.lessee,
      fault: node.fault,
      retired: this.d.bool(node.retired),
      created_at: node.created_at,
      updated_at: node.updated_at,
      ...matchColumns(node),
      doc: JSON.stringify(node),
    };
  }

  /** The database's constraint error as the domain's, or the error itself. */
  private conflict(error: unknown, message: (detail: string) => string | null): unknown {
    const violation = this.d.violation(error);
    if (violation?.kind !== "unique") return error;
    const text = message(violation.detail);
    return text === null ? error : new Duplicate(text);
  }

  private async writeNode(db: Executor, node: NodeRecord, insert: boolean): Promise<void> {
    const cols = this.nodeColumns(node);
    const names = Object.keys(cols);
    const p = this.params();
    try {
      if (insert) {
        const values = names.map((name) => p.add(cols[name] ?? null));
        await db.run(`INSERT INTO nodes (${names.join(",")}) VALUES (${values.join(",")})`, p.values);
      } else {
        const sets = names.filter((n) => n !== "uuid").map((n) => `${n} = ${p.add(cols[n] ?? null)}`);
        await db.run(`UPDATE nodes SET ${sets.join(",")} WHERE uuid = ${p.add(node.uuid)}`, p.values);
        await db.run(`DELETE FROM node_traits WHERE node_uuid = ${this.d.placeholder(1)}`, [node.uuid]);
      }
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
   * text and its parameters are in `p` already): the document is edited in place by the database, never read
   * and rewritten whole. @returns the documents as written
   */
  private async edit<T>(
    table: string,
    edit: Edit,
    options: { condition: (p: Params) => string; p?: Params; prefix?: string },
  ): Promise<T[]> {
    const p = options.p ?? this.params();
    const sets = Object.entries(edit.columns).map(([column, value]) => `${column} = ${p.add(value)}, `);
    let doc = "doc";
    for (const path of edit.remove ?? []) doc = this.d.jsonRemove(doc, p.add(this.d.path(path)));
    for (const [path, value] of edit.set) {
      doc = this.d.jsonSet(doc, p.add(this.d.path(path)), p.add(JSON.stringify(value)));
    }
    const sql = `${options.prefix ?? ""}UPDATE ${table} SET ${sets.join("")}doc = ${doc}
      WHERE ${options.condition(p)} RETURNING doc`;
    return this.docs<T>(sql, p.values);
  }

  /** Edits one node, only while its reservation is `ifReservedBy` when that is given. */
  private async editNode(uuid: string, edit: Edit, options: Reservation = {}): Promise<NodeRecord> {
    const holder = options.ifReservedBy;
    const [node] = await this.edit<NodeRecord>("nodes", edit, {
      condition: (p) =>
        `uuid = ${p.add(uuid)}` +
        (holder === undefined
          ? ""
          : holder === null
            ? " AND reservation IS NULL"
            : ` AND reservation = ${p.add(holder)}`),
    });
    if (node) return node;
    const current = await this.getNode(uuid);
    if (!current || current.uuid !== uuid) throw new NodeNotFound(uuid);
    throw new NodeLocked(current.uuid, current.reservation);
  }

  private nodeRow(ident: string, db: Executor = this.d, lock = ""): Promise<NodeRecord | null> {
    return this.first<NodeRecord>(
      `SELECT doc FROM nodes WHERE ${identColumn(ident)} = ${this.d.placeholder(1)}${lock}`,
      [ident],
      db,
    );
  }

  /** Writes every node again, so columns derived from the documents are filled (after a migration). */
  protected async rewriteNodes(): Promise<void> {
    await this.d.transaction(async (db) => {
      for (const node of await this.docs<NodeRecord>("SELECT doc FROM nodes", [], db)) {
        await this.writeNode(db, node, false);
      }
    });
  }

  async createNode(node: NodeRecord): Promise<NodeRecord> {
    await this.writeNode(this.d, node, true);
    return node;
  }

  getNode(ident: string): Promise<NodeRecord | null> {
    return this.nodeRow(ident);
  }

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
      return {
        json: storedSummariesJson(rows, linkBase),
        count: rows.length,
        lastUuid: rows.at(-1)?.[0] ?? null,
      };
    }
    const key = sortKey(page, NODE_SORT_KEYS);
    const { sql, p, order } = this.nodeSelect(
      (p) =>
        `list_json || ${summaryLinksSql(linkBase, (v) => p.add(v))} AS obj, id${key === "id" ? "" : `, ${key}`}`,
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

  countNodesByState(): Promise<Record<string, number>> {
    return this.countNodesBy("provision_state");
  }

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
      const node = await this.nodeRow(uuid, db, this.d.forUpdate);
      if (!node) throw new NodeNotFound(uuid);
      if (options.ifReservedBy !== undefined && node.reservation !== options.ifReservedBy) {
        throw new NodeLocked(node.uuid, node.reservation);
      }
      const updated: NodeRecord = { ...node, ...patch, uuid: node.uuid, updated_at: now() };
      await this.writeNode(db, updated, false);
      return updated;
    });
  }

  updateDriverInternalInfo(
    uuid: string,
    changes: InternalInfoChanges,
    options: Reservation = {},
  ): Promise<NodeRecord> {
    const at = now();
    const edit: Required<Edit> = { columns: { updated_at: at }, set: [[["updated_at"], at]], remove: [] };
    for (const [key, value] of Object.entries(changes)) {
      if (value === undefined) edit.remove.push(["driver_internal_info", key]);
      else edit.set.push([["driver_internal_info", key], value]);
    }
    return this.editNode(uuid, edit, options);
  }

  setDeployProgress(uuid: string, progress: unknown, options: Reservation = {}): Promise<NodeRecord> {
    return this.updateDriverInternalInfo(uuid, { deploy_progress: progress ?? undefined }, options);
  }

  async deleteNode(uuid: string): Promise<void> {
    const changed = await this.d.run(`DELETE FROM nodes WHERE uuid = ${this.d.placeholder(1)}`, [uuid]);
    if (changed === 0) throw new NodeNotFound(uuid);
  }

  /** One statement: the row lock makes the test-and-set atomic without a round trip per step. */
  reserveNode(uuid: string, holder: string): Promise<NodeRecord> {
    const edit = { columns: { reservation: holder }, set: [[["reservation"], holder]] } satisfies Edit;
    return this.editNode(uuid, edit, { ifReservedBy: null });
  }

  async releaseNode(uuid: string, holder: string): Promise<void> {
    await this.edit("nodes", topLevelEdit({ reservation: null }, ["reservation"]), {
      condition: (p) => `uuid = ${p.add(uuid)} AND reservation = ${p.add(holder)}`,
    });
  }

  async releaseAllReservations(holder: string): Promise<string[]> {
    const released = await this.edit<NodeRecord>(
      "nodes",
      topLevelEdit({ reservation: null }, ["reservation"]),
      {
        condition: (p) => `reservation = ${p.add(holder)}`,
      },
    );
    return released.map((node) => node.uuid);
  }

  async listReservedBy(holders: readonly string[]): Promise<ReservedNode[]> {
    if (holders.length === 0) return [];
    const p = this.params();
    return this.d.all<ReservedNode>(
      `SELECT uuid, reservation, conductor_group FROM nodes
       WHERE ${this.d.inList("reservation", p.add(this.d.list(holders)))}`,
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
    const p = this.params();
    if (record === null) {
      await this.d.run(`DELETE FROM agent_tokens WHERE node_uuid = ${p.add(uuid)}`, p.values);
      return;
    }
    await this.d.run(
      `INSERT INTO agent_tokens (node_uuid, digest, boot_id) VALUES (${p.add(uuid)}, ${p.add(record.digest)}, ${p.add(record.bootId)})
       ON CONFLICT (node_uuid) DO UPDATE SET digest = excluded.digest, boot_id = excluded.boot_id`,
      p.values,
    );
  }

  async saveInventory(uuid: string, inventory: unknown): Promise<void> {
    const p = this.params();
    await this.d.run(
      `INSERT INTO inventories (node_uuid, doc) VALUES (${p.add(uuid)}, ${p.add(JSON.stringify(inventory))})
       ON CONFLICT (node_uuid) DO UPDATE SET doc = excluded.doc`,
      p.values,
    );
  }

  getInventory(uuid: string): Promise<unknown> {
    return this.first(`SELECT doc FROM inventories WHERE node_uuid = ${this.d.placeholder(1)}`, [uuid]);
  }

  private async writePort(db: Executor, port: PortRecord, insert: boolean): Promise<void> {
    const p = this.params();
    const at = (value: string) => p.add(value);
    const [uuid, address, node, doc] = [port.uuid, port.address, port.node_uuid, JSON.stringify(port)];
    try {
      await db.run(
        insert
          ? `INSERT INTO ports (uuid, address, node_uuid, doc) VALUES (${at(uuid)}, ${at(address)}, ${at(node)}, ${at(doc)})`
          : `UPDATE ports SET address = ${at(address)}, node_uuid = ${at(node)}, doc = ${at(doc)} WHERE uuid = ${at(uuid)}`,
        p.values,
      );
    } catch (error) {
      if (this.d.violation(error)?.kind === "foreign") throw new NodeNotFound(port.node_uuid);
      throw this.conflict(error, (detail) =>
        detail.includes("address")
          ? `A port with MAC address ${port.address} already exists.`
          : `A port with UUID ${port.uuid} already exists.`,
      );
    }
  }

  async createPort(port: PortRecord): Promise<PortRecord> {
    await this.writePort(this.d, port, true);
    return port;
  }

  getPort(uuid: string): Promise<PortRecord | null> {
    return this.first<PortRecord>(`SELECT doc FROM ports WHERE uuid = ${this.d.placeholder(1)}`, [uuid]);
  }

  listPorts(filter: PortFilter, page: Page): Promise<PortRecord[]> {
    const p = this.params();
    const conditions: string[] = [];
    if (filter.node_uuid !== undefined) conditions.push(`node_uuid = ${p.add(filter.node_uuid)}`);
    if (filter.address !== undefined) conditions.push(`address = ${p.add(filter.address)}`);
    if (filter.project !== undefined) {
      conditions.push(
        `node_uuid IN (SELECT uuid FROM nodes WHERE owner = ${p.add(filter.project)} OR lessee = ${p.add(filter.project)})`,
      );
    }
    const { sql } = this.select("ports", "doc", { conditions, p, page, keys: ["id", "uuid", "address"] });
    return this.docs<PortRecord>(sql, p.values);
  }

  updatePort(uuid: string, patch: Partial<PortRecord>): Promise<PortRecord> {
    return this.d.transaction(async (db) => {
      const sql = `SELECT doc FROM ports WHERE uuid = ${this.d.placeholder(1)}${this.d.forUpdate}`;
      const port = await this.first<PortRecord>(sql, [uuid], db);
      if (!port) throw new NotFound(`Port ${uuid} could not be found.`);
      const updated = { ...port, ...patch, uuid, updated_at: now() };
      await this.writePort(db, updated, false);
      return updated;
    });
  }

  async deletePort(uuid: string): Promise<void> {
    if ((await this.d.run(`DELETE FROM ports WHERE uuid = ${this.d.placeholder(1)}`, [uuid])) === 0) {
      throw new NotFound(`Port ${uuid} could not be found.`);
    }
  }

  async createAllocation(allocation: AllocationRecord): Promise<AllocationRecord> {
    const p = this.params();
    const { uuid, name, state, node_uuid, resource_class } = allocation;
    const values = [uuid, name, state, node_uuid, resource_class, JSON.stringify(allocation)].map((v) =>
      p.add(v),
    );
    try {
      await this.d.run(
        `INSERT INTO allocations (uuid, name, state, node_uuid, resource_class, doc) VALUES (${values.join(", ")})`,
        p.values,
      );
      return allocation;
    } catch (error) {
      throw this.conflict(error, (detail) =>
        detail.includes("name")
          ? `An allocation with name ${allocation.name} already exists.`
          : `An allocation with UUID ${allocation.uuid} already exists.`,
      );
    }
  }

  getAllocation(ident: string): Promise<AllocationRecord | null> {
    const sql = `SELECT doc FROM allocations WHERE ${identColumn(ident)} = ${this.d.placeholder(1)}`;
    return this.first<AllocationRecord>(sql, [ident]);
  }

  listAllocations(filter: AllocationFilter, page: Page): Promise<AllocationRecord[]> {
    const p = this.params();
    const conditions: string[] = [];
    for (const key of ["node_uuid", "resource_class", "state"] as const) {
      const value = filter[key];
      if (value !== undefined) conditions.push(`${key} = ${p.add(value)}`);
    }
    if (filter.owner !== undefined) {
      conditions.push(`${this.d.jsonText("doc", "owner")} = ${p.add(filter.owner)}`);
    }
    const keys = ["id", "uuid", "name", "state"];
    return this.docs<AllocationRecord>(
      this.select("allocations", "doc", { conditions, p, page, keys }).sql,
      p.values,
    );
  }

  /**
   * One statement (one round trip, no BEGIN/COMMIT): the row lock of the UPDATE serialises writers, and the
   * indexed columns are set from the same patch as the document.
   */
  async updateAllocation(uuid: string, patch: Partial<AllocationRecord>): Promise<AllocationRecord> {
    const changes: Record<string, unknown> = { ...patch, updated_at: now() };
    delete changes.uuid;
    try {
      const [updated] = await this.edit<AllocationRecord>(
        "allocations",
        topLevelEdit(changes, ["name", "state", "node_uuid", "resource_class"]),
        { condition: (p) => `${identColumn(uuid)} = ${p.add(uuid)}` },
      );
      if (!updated) throw new NotFound(`Allocation ${uuid} could not be found.`);
      return updated;
    } catch (error) {
      throw this.conflict(error, () => `An allocation with name ${String(patch.name)} already exists.`);
    }
  }

  async deleteAllocation(uuid: string): Promise<void> {
    if ((await this.d.run(`DELETE FROM allocations WHERE uuid = ${this.d.placeholder(1)}`, [uuid])) === 0) {
      throw new NotFound(`Allocation ${uuid} could not be found.`);
    }
  }

  async claimNode(allocationUuid: string, request: CandidateRequest): Promise<NodeRecord | null> {
    const at = now();
    const edit: Edit = {
      columns: { instance_uuid: allocationUuid, updated_at: at },
      set: [
        [["instance_uuid"], allocationUuid],
        [["allocation_uuid"], allocationUuid],
        [["updated_at"], at],
      ],
    };
    // One statement, so one round trip and no BEGIN/COMMIT: the CTE picks (and, in PostgreSQL, locks) the row
    // and the UPDATE writes only what a claim changes (traits and matching columns are untouched). A row
    // another claim holds is skipped, not waited for, so racing clients never queue behind each other.
    const claim = async (batch: number | null) => {
      const p = this.params();
      const sql = this.d;
      const query = candidateQuery(request, {
        param: (v) => p.add(v),
        false: sql.false,
        traitRows: sql.traitRows,
      });
      const prefix = `WITH chosen AS (${sql.claimSelect(query, batch)}) `;
      const condition = () => "id IN (SELECT id FROM chosen)";
      const [node] = await this.edit<NodeRecord>("nodes", edit, { condition, p, prefix });
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
      await db.run(
        `UPDATE conductors SET online = ${no} WHERE hostname = ${p.add(record.hostname)} AND online = ${yes}
         AND (heartbeat_at < ${p.add(options.staleBefore)} OR ${this.d.inList("identity", p.add(this.d.list(options.retire)))})`,
        p.values,
      );
      const r = record;
      const row = [
        r.identity,
        r.hostname,
        r.conductor_group,
        JSON.stringify(r.drivers),
        r.url,
        r.machine,
        r.pid,
      ];
      const q = this.params();
      const values = [...row, r.created_at, r.heartbeat_at].map((value) => q.add(value));
      try {
        await db.run(
          `INSERT INTO conductors (identity, hostname, conductor_group, drivers, url, machine, pid, created_at, heartbeat_at, online)
           VALUES (${values.join(", ")}, ${yes})`,
          q.values,
        );
      } catch (error) {
        if (this.d.violation(error)?.kind === "unique") throw new ConductorAlreadyRegistered(record.hostname);
        throw error;
      }
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
    type Row = Omit<ConductorRecord, "drivers" | "online" | "heartbeat_at"> & Record<string, unknown>;
    const rows = await this.d.all<Row>("SELECT * FROM conductors ORDER BY created_at, identity", []);
    // BIGINT arrives from PostgreSQL as a string (it may exceed 2^53; epoch milliseconds do not)
    return rows.map((r) => ({
      ...r,
      drivers: this.d.doc<string[]>(r.drivers),
      online: r.online === true || r.online === 1,
      heartbeat_at: Number(r.heartbeat_at),
    }));
  }

  async addNodeHistory(entry: NodeHistoryRecord): Promise<void> {
    const p = this.params();
    const values = [entry.uuid, entry.node_uuid, entry.created_at, JSON.stringify(entry)].map((v) =>
      p.add(v),
    );
    await this.d.run(
      `INSERT INTO node_history (uuid, node_uuid, created_at, doc) VALUES (${values.join(", ")})`,
      p.values,
    );
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

  getNodeHistory(nodeUuid: string, eventUuid: string): Promise<NodeHistoryRecord | null> {
    const p = this.params();
    const sql = `SELECT doc FROM node_history WHERE node_uuid = ${p.add(nodeUuid)} AND uuid = ${p.add(eventUuid)}`;
    return this.first<NodeHistoryRecord>(sql, p.values);
  }

  close(): Promise<void> {
    return this.d.close();
  }
}
