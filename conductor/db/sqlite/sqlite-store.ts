import Database from "better-sqlite3";
import type { AllocationRecord, ConductorRecord, NodeRecord, PortRecord } from "../../../shared/resources.ts";
import {
  ConductorAlreadyRegistered,
  Duplicate,
  NODE_SORT_KEYS,
  NodeLocked,
  NodeNotFound,
  NotFound,
  type NodeSummary,
  type NodeSummaryField,
  summaryColumns,
  type AllocationFilter,
  type NodeFilter,
  type Page,
  type ReservedNode,
  type PortFilter,
  type Store,
} from "../store.ts";
import { MIGRATIONS } from "./migrations.ts";
import type { NodeHistoryRecord } from "../../../shared/history.ts";
import { candidateQuery, matchColumns, type CandidateRequest } from "../candidates.ts";
import { isUuid } from "../../../shared/uuid.ts";
import { lastUuidOf, summaryObjectSql, type SummaryJsonPage } from "../summary-json.ts";

type Row = { doc: string };
type SqlValue = string | number | null;

function nodeColumns(node: NodeRecord): Record<string, SqlValue> {
  return {
    uuid: node.uuid,
    name: node.name,
    driver: node.driver,
    provision_state: node.provision_state,
    power_state: node.power_state,
    maintenance: node.maintenance ? 1 : 0,
    reservation: node.reservation,
    instance_uuid: node.instance_uuid,
    resource_class: node.resource_class,
    conductor_group: node.conductor_group,
    owner: node.owner,
    lessee: node.lessee,
    fault: node.fault,
    retired: node.retired ? 1 : 0,
    created_at: node.created_at,
    updated_at: node.updated_at,
    ...matchColumns(node),
    doc: JSON.stringify(node),
  };
}

function isUniqueViolation(error: unknown): error is Error & { message: string } {
  return (
    error instanceof Error && "code" in error && String(error.code).startsWith("SQLITE_CONSTRAINT_UNIQUE")
  );
}

/** Builds `(sort, id) > (marker's sort, marker's id)` keyset paging. */
function pageClause(
  table: string,
  page: Page,
  allowedKeys: readonly string[],
): { where: string; order: string; params: SqlValue[]; limit: number | null; key: string } {
  const key = page.sortKey && allowedKeys.includes(page.sortKey) ? page.sortKey : "id";
  const dir = page.sortDir === "desc" ? "DESC" : "ASC";
  const cmp = dir === "DESC" ? "<" : ">";
  const params: SqlValue[] = [];
  let where = "";
  if (page.marker !== undefined) {
    if (key === "id") {
      where = `id ${cmp} (SELECT id FROM ${table} WHERE uuid = ?)`;
      params.push(page.marker);
    } else {
      // NULLs sort first in SQLite; IFNULL keeps the comparison total.
      where = `(IFNULL(${key}, ''), id) ${cmp} (SELECT IFNULL(${key}, ''), id FROM ${table} WHERE uuid = ?)`;
      params.push(page.marker);
    }
  }
  const order = key === "id" ? `id ${dir}` : `IFNULL(${key}, '') ${dir}, id ${dir}`;
  return { where, order, params, limit: page.limit ?? null, key };
}

/**
 * How many prepared statements are kept. Values never reach SQL text (LIMIT too is a parameter), but the
 * filter and sort combinations of list queries still make thousands of distinct texts: the cache keeps
 * the most recently used ones.
 */
export const STATEMENT_CACHE_SIZE = 256;

/** `LIMIT ?` with its parameter (a value never enters the SQL text), or nothing. */
function limitClause(limit: number | null): { sql: string; params: SqlValue[] } {
  return limit === null ? { sql: "", params: [] } : { sql: " LIMIT ?", params: [limit] };
}

/** The embedded store: one SQLite file (or ":memory:"), WAL mode, migrations on open. */
export class SqliteStore implements Store {
  private readonly db: Database.Database;
  /** Least recently used first (a Map keeps insertion order; a hit re-inserts). */
  private readonly statements = new Map<string, Database.Statement>();

  /**
   * Prepared statements are reused: preparing costs more than running most of them. A `raw` one returns rows
   * as arrays and is cached apart from the keyed-row statement of the same text.
   */
  private stmt(sql: string, options: { raw?: boolean } = {}): Database.Statement {
    const key = options.raw === true ? `raw\u0000${sql}` : sql;
    let statement = this.statements.get(key);
    if (statement) {
      this.statements.delete(key);
    } else {
      statement = this.db.prepare(sql);
      if (options.raw === true) statement.raw(true);
      if (this.statements.size >= STATEMENT_CACHE_SIZE) {
        const oldest = this.statements.keys().next().value;
        if (oldest !== undefined) this.statements.delete(oldest);
      }
    }
    this.statements.set(key, statement);
    return statement;
  }

  /** How many prepared statements are cached now (bounded by STATEMENT_CACHE_SIZE); for tests. */
  get statementCacheSize(): number {
    return this.statements.size;
  }

  constructor(path: string) {
    this.db = new Database(path);
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("synchronous = NORMAL");
    this.db.pragma("foreign_keys = ON");
    this.db.pragma("busy_timeout = 5000");
    this.migrate();
  }

  private migrate(): void {
    const version = this.db.pragma("user_version", { simple: true }) as number;
    for (let i = version; i < MIGRATIONS.length; i++) {
      this.db.transaction(() => {
        this.db.exec(MIGRATIONS[i] ?? "");
        this.db.pragma(`user_version = ${i + 1}`);
      })();
    }
    if (version > 0 && version < MIGRATIONS.length) {
      // derived columns (matching, traits) are filled from the documents by writing every node again
      this.db.transaction(() => {
        for (const row of this.db.prepare("SELECT doc FROM nodes").all() as Row[]) {
          this.writeNode(JSON.parse(row.doc) as NodeRecord, false);
        }
      })();
    }
  }

  private nodeRow(ident: string): NodeRecord | null {
    const column = isUuid(ident) ? "uuid" : "name";
    const row = this.stmt(`SELECT doc FROM nodes WHERE ${column} = ?`).get(ident) as Row | undefined;
    return row ? (JSON.parse(row.doc) as NodeRecord) : null;
  }

  private writeNode(node: NodeRecord, insert: boolean): void {
    const cols = nodeColumns(node);
    try {
      if (insert) {
        const names = Object.keys(cols);
        this.stmt(
          `INSERT INTO nodes (${names.join(",")}) VALUES (${names.map((n) => "@" + n).join(",")})`,
        ).run(cols);
      } else {
        const sets = Object.keys(cols)
          .filter((n) => n !== "uuid")
          .map((n) => `${n} = @${n}`);
        this.stmt(`UPDATE nodes SET ${sets.join(",")} WHERE uuid = @uuid`).run(cols);
        this.stmt("DELETE FROM node_traits WHERE node_uuid = ?").run(node.uuid);
      }
      for (const trait of new Set(node.traits)) {
        this.stmt("INSERT INTO node_traits (node_uuid, trait) VALUES (?, ?)").run(node.uuid, trait);
      }
    } catch (error) {
      if (isUniqueViolation(error)) {
        if (error.message.includes("nodes.name"))
          throw new Duplicate(`A node with name ${node.name} already exists.`);
        if (error.message.includes("nodes.instance_uuid"))
          throw new Duplicate(`Instance ${node.instance_uuid} is already associated with a node.`);
        throw new Duplicate(`A node with UUID ${node.uuid} already exists.`);
      }
      throw error;
    }
  }

  async createNode(node: NodeRecord): Promise<NodeRecord> {
    this.writeNode(node, true);
    return node;
  }

  async getNode(ident: string): Promise<NodeRecord | null> {
    return this.nodeRow(ident);
  }

  /** `select`: the column list, or with `raw` rows as arrays. */
  /** WHERE (with its parameters) and paging of a node list. */
  private nodeConditions(
    filter: NodeFilter,
    page: Page,
  ): { where: string; params: SqlValue[]; paging: ReturnType<typeof pageClause> } {
    const where: string[] = [];
    const params: SqlValue[] = [];
    const eq = (column: string, value: SqlValue | undefined): void => {
      if (value === undefined) return;
      where.push(`${column} = ?`);
      params.push(value);
    };
    eq("provision_state", filter.provision_state);
    eq("maintenance", filter.maintenance === undefined ? undefined : Number(filter.maintenance));
    eq("retired", filter.retired === undefined ? undefined : Number(filter.retired));
    eq("resource_class", filter.resource_class);
    eq("driver", filter.driver);
    eq("conductor_group", filter.conductor_group);
    eq("instance_uuid", filter.instance_uuid);
    eq("fault", filter.fault);
    eq("owner", filter.owner);
    eq("lessee", filter.lessee);
    eq("reservation", filter.reservation);
    if (filter.project !== undefined) {
      where.push("(owner = ? OR lessee = ?)");
      params.push(filter.project, filter.project);
    }
    if (filter.reserved !== undefined) where.push(`reservation IS ${filter.reserved ? "NOT " : ""}NULL`);
    if (filter.associated !== undefined)
      where.push(`instance_uuid IS ${filter.associated ? "NOT " : ""}NULL`);
    const paging = pageClause("nodes", page, NODE_SORT_KEYS);
    if (paging.where) where.push(paging.where);
    return { where: where.length ? ` WHERE ${where.join(" AND ")}` : "", params, paging };
  }

  private nodeQuery(
    select: string | { columns: string; raw: true },
    filter: NodeFilter,
    page: Page,
  ): unknown[] {
    const columns = typeof select === "string" ? select : select.columns;
    const { where, params, paging } = this.nodeConditions(filter, page);
    const limit = limitClause(paging.limit);
    const sql = `SELECT ${columns} FROM nodes${where} ORDER BY ${paging.order}${limit.sql}`;
    return this.stmt(sql, { raw: typeof select !== "string" }).all(
      ...params,
      ...paging.params,
      ...limit.params,
    );
  }

  async listNodes(filter: NodeFilter, page: Page): Promise<NodeRecord[]> {
    return (this.nodeQuery("doc", filter, page) as Row[]).map((r) => JSON.parse(r.doc) as NodeRecord);
  }

  async listNodeSummaries<F extends NodeSummaryField = NodeSummaryField>(
    filter: NodeFilter,
    page: Page,
    columns?: readonly F[],
  ): Promise<Pick<NodeSummary, F | "uuid">[]> {
    const names = summaryColumns(columns);
    // Rows as arrays: better-sqlite3 builds a keyed object per row much more slowly than an array.
    const rows = this.nodeQuery({ columns: names.join(","), raw: true }, filter, page) as SqlValue[][];
    const maintenance = names.indexOf("maintenance");
    return rows.map((row) => {
      const node: Record<string, unknown> = {};
      for (let i = 0; i < names.length; i++) node[names[i] as string] = row[i];
      if (maintenance >= 0) node.maintenance = row[maintenance] === 1;
      return node as Pick<NodeSummary, F | "uuid">;
    });
  }

  async listNodeSummaryJson(filter: NodeFilter, page: Page, linkBase: string): Promise<SummaryJsonPage> {
    const objectParams: SqlValue[] = [];
    const object = summaryObjectSql(linkBase, (value) => {
      objectParams.push(value);
      return "?";
    });
    const { where, params, paging } = this.nodeConditions(filter, page);
    const limit = limitClause(paging.limit);
    const sortColumn = paging.key === "id" ? "" : `, ${paging.key}`;
    // The subquery pages; the aggregate joins its objects in the same order (named, as an aggregate's order
    // is otherwise unspecified). The text comes back as a Buffer: no JavaScript string is made of it.
    const sql = `SELECT CAST('[' || IFNULL(group_concat(obj, ',' ORDER BY ${paging.order}), '') || ']' AS BLOB), count(*)
      FROM (SELECT ${object} AS obj, id${sortColumn} FROM nodes${where} ORDER BY ${paging.order}${limit.sql})`;
    const [json, count] = this.stmt(sql, { raw: true }).get(
      ...objectParams,
      ...params,
      ...paging.params,
      ...limit.params,
    ) as [Buffer, number];
    return { json, count, lastUuid: lastUuidOf(json) };
  }

  async listOrphanedBoots(options: {
    waitStates: readonly string[];
    live: readonly string[];
  }): Promise<NodeRecord[]> {
    const marks = (n: number) => Array.from({ length: n }, () => "?").join(",");
    const states = marks(options.waitStates.length) || "NULL";
    const live = marks(options.live.length) || "NULL";
    // NOT IN (NULL) would match nothing: an empty list is written as (NULL) only where it must match nothing
    const notLive = options.live.length ? `NOT IN (${live})` : "IS NOT NULL";
    const rows = this.stmt(
      `SELECT doc FROM nodes INDEXED BY nodes_ramdisk_prepared_by
         WHERE ramdisk_prepared_by IS NOT NULL AND ramdisk_prepared_by ${notLive} AND provision_state IN (${states})
       UNION ALL
       SELECT doc FROM nodes INDEXED BY nodes_instance_prepared_by
         WHERE instance_prepared_by IS NOT NULL AND instance_prepared_by ${notLive} AND provision_state = 'active'`,
    ).all(...options.live, ...options.waitStates, ...options.live) as Row[];
    return rows.map((r) => JSON.parse(r.doc) as NodeRecord);
  }

  async countNodesByState(): Promise<Record<string, number>> {
    const rows = this.stmt(
      "SELECT provision_state, COUNT(*) AS n FROM nodes GROUP BY provision_state",
    ).all() as {
      provision_state: string;
      n: number;
    }[];
    return Object.fromEntries(rows.map((r) => [r.provision_state, r.n]));
  }

  async countNodesBy(column: "provision_state" | "power_state" | "fault"): Promise<Record<string, number>> {
    // the column comes from a closed union, never from a request
    const rows = this.stmt(
      `SELECT COALESCE(${column}, 'none') AS value, COUNT(*) AS n FROM nodes GROUP BY ${column}`,
    ).all() as { value: string; n: number }[];
    return Object.fromEntries(rows.map((r) => [r.value, r.n]));
  }

  async updateNode(
    uuid: string,
    patch: Partial<NodeRecord>,
    options: { ifReservedBy?: string | null } = {},
  ): Promise<NodeRecord> {
    return this.db.transaction(() => {
      const node = this.nodeRow(uuid);
      if (!node) throw new NodeNotFound(uuid);
      if (options.ifReservedBy !== undefined && node.reservation !== options.ifReservedBy) {
        throw new NodeLocked(node.uuid, node.reservation);
      }
      const updated: NodeRecord = {
        ...node,
        ...patch,
        uuid: node.uuid,
        updated_at: new Date().toISOString(),
      };
      this.writeNode(updated, false);
      return updated;
    })();
  }

  async deleteNode(uuid: string): Promise<void> {
    const result = this.stmt("DELETE FROM nodes WHERE uuid = ?").run(uuid);
    if (result.changes === 0) throw new NodeNotFound(uuid);
  }

  async reserveNode(uuid: string, holder: string): Promise<NodeRecord> {
    return this.db.transaction(() => {
      const node = this.nodeRow(uuid);
      if (!node) throw new NodeNotFound(uuid);
      if (node.reservation !== null) throw new NodeLocked(node.uuid, node.reservation);
      const updated = { ...node, reservation: holder };
      this.writeNode(updated, false);
      return updated;
    })();
  }

  async releaseNode(uuid: string, holder: string): Promise<void> {
    this.db.transaction(() => {
      const node = this.nodeRow(uuid);
      if (!node || node.reservation !== holder) return;
      this.writeNode({ ...node, reservation: null }, false);
    })();
  }

  async releaseAllReservations(holder: string): Promise<string[]> {
    return this.db.transaction(() => {
      const rows = this.stmt("SELECT doc FROM nodes WHERE reservation = ?").all(holder) as Row[];
      const released = rows.map((r) => ({ ...(JSON.parse(r.doc) as NodeRecord), reservation: null }));
      for (const node of released) this.writeNode(node, false);
      return released.map((n) => n.uuid);
    })();
  }

  async listReservedBy(holders: readonly string[]): Promise<ReservedNode[]> {
    if (holders.length === 0) return [];
    return this.stmt(
      "SELECT uuid, reservation, conductor_group FROM nodes WHERE reservation IN (SELECT value FROM json_each(?))",
    ).all(JSON.stringify(holders)) as ReservedNode[];
  }

  async getAgentToken(uuid: string): Promise<{ digest: string; bootId: string } | null> {
    const row = this.stmt("SELECT digest, boot_id FROM agent_tokens WHERE node_uuid = ?").get(uuid) as
      { digest: string; boot_id: string } | undefined;
    return row ? { digest: row.digest, bootId: row.boot_id } : null;
  }

  async setAgentToken(uuid: string, record: { digest: string; bootId: string } | null): Promise<void> {
    if (record === null) {
      this.stmt("DELETE FROM agent_tokens WHERE node_uuid = ?").run(uuid);
      return;
    }
    this.stmt(
      "INSERT INTO agent_tokens (node_uuid, digest, boot_id) VALUES (?, ?, ?) ON CONFLICT (node_uuid) DO UPDATE SET digest = excluded.digest, boot_id = excluded.boot_id",
    ).run(uuid, record.digest, record.bootId);
  }

  async saveInventory(uuid: string, inventory: unknown): Promise<void> {
    this.stmt(
      "INSERT INTO inventories (node_uuid, doc) VALUES (?, ?) ON CONFLICT (node_uuid) DO UPDATE SET doc = excluded.doc",
    ).run(uuid, JSON.stringify(inventory));
  }

  async getInventory(uuid: string): Promise<unknown> {
    const row = this.stmt("SELECT doc FROM inventories WHERE node_uuid = ?").get(uuid) as Row | undefined;
    return row ? (JSON.parse(row.doc) as unknown) : null;
  }

  private portRow(where: string, value: string): PortRecord | null {
    const row = this.stmt(`SELECT doc FROM ports WHERE ${where} = ?`).get(value) as Row | undefined;
    return row ? (JSON.parse(row.doc) as PortRecord) : null;
  }

  private writePort(port: PortRecord, insert: boolean): void {
    const params = {
      uuid: port.uuid,
      address: port.address,
      node_uuid: port.node_uuid,
      doc: JSON.stringify(port),
    };
    try {
      if (insert) {
        this.stmt(
          "INSERT INTO ports (uuid, address, node_uuid, doc) VALUES (@uuid, @address, @node_uuid, @doc)",
        ).run(params);
      } else {
        this.stmt(
          "UPDATE ports SET address = @address, node_uuid = @node_uuid, doc = @doc WHERE uuid = @uuid",
        ).run(params);
      }
    } catch (error) {
      if (isUniqueViolation(error)) {
        if (error.message.includes("ports.address"))
          throw new Duplicate(`A port with MAC address ${port.address} already exists.`);
        throw new Duplicate(`A port with UUID ${port.uuid} already exists.`);
      }
      if (error instanceof Error && "code" in error && error.code === "SQLITE_CONSTRAINT_FOREIGNKEY") {
        throw new NodeNotFound(port.node_uuid);
      }
      throw error;
    }
  }

  async createPort(port: PortRecord): Promise<PortRecord> {
    this.writePort(port, true);
    return port;
  }

  async getPort(uuid: string): Promise<PortRecord | null> {
    return this.portRow("uuid", uuid);
  }

  async listPorts(filter: PortFilter, page: Page): Promise<PortRecord[]> {
    const where: string[] = [];
    const params: SqlValue[] = [];
    if (filter.node_uuid !== undefined) {
      where.push("node_uuid = ?");
      params.push(filter.node_uuid);
    }
    if (filter.address !== undefined) {
      where.push("address = ?");
      params.push(filter.address);
    }
    if (filter.project !== undefined) {
      where.push("node_uuid IN (SELECT uuid FROM nodes WHERE owner = ? OR lessee = ?)");
      params.push(filter.project, filter.project);
    }
    const paging = pageClause("ports", page, ["id", "uuid", "address"]);
    if (paging.where) where.push(paging.where);
    const limit = limitClause(paging.limit);
    const sql = `SELECT doc FROM ports${where.length ? " WHERE " + where.join(" AND ") : ""} ORDER BY ${paging.order}${limit.sql}`;
    return (this.stmt(sql).all(...params, ...paging.params, ...limit.params) as Row[]).map(
      (r) => JSON.parse(r.doc) as PortRecord,
    );
  }

  async updatePort(uuid: string, patch: Partial<PortRecord>): Promise<PortRecord> {
    return this.db.transaction(() => {
      const port = this.portRow("uuid", uuid);
      if (!port) throw new NotFound(`Port ${uuid} could not be found.`);
      const updated = { ...port, ...patch, uuid, updated_at: new Date().toISOString() };
      this.writePort(updated, false);
      return updated;
    })();
  }

  async deletePort(uuid: string): Promise<void> {
    if (this.stmt("DELETE FROM ports WHERE uuid = ?").run(uuid).changes === 0) {
      throw new NotFound(`Port ${uuid} could not be found.`);
    }
  }

  private allocationRow(ident: string): AllocationRecord | null {
    const column = isUuid(ident) ? "uuid" : "name";
    const row = this.stmt(`SELECT doc FROM allocations WHERE ${column} = ?`).get(ident) as Row | undefined;
    return row ? (JSON.parse(row.doc) as AllocationRecord) : null;
  }

  private writeAllocation(allocation: AllocationRecord, insert: boolean): void {
    const params = {
      uuid: allocation.uuid,
      name: allocation.name,
      state: allocation.state,
      node_uuid: allocation.node_uuid,
      resource_class: allocation.resource_class,
      doc: JSON.stringify(allocation),
    };
    try {
      if (insert) {
        this.stmt(
          "INSERT INTO allocations (uuid, name, state, node_uuid, resource_class, doc) VALUES (@uuid, @name, @state, @node_uuid, @resource_class, @doc)",
        ).run(params);
      } else {
        this.stmt(
          "UPDATE allocations SET name = @name, state = @state, node_uuid = @node_uuid, resource_class = @resource_class, doc = @doc WHERE uuid = @uuid",
        ).run(params);
      }
    } catch (error) {
      if (isUniqueViolation(error)) {
        throw new Duplicate(
          error.message.includes("allocations.name")
            ? `An allocation with name ${allocation.name} already exists.`
            : `An allocation with UUID ${allocation.uuid} already exists.`,
        );
      }
      throw error;
    }
  }

  async createAllocation(allocation: AllocationRecord): Promise<AllocationRecord> {
    this.writeAllocation(allocation, true);
    return allocation;
  }

  async getAllocation(ident: string): Promise<AllocationRecord | null> {
    return this.allocationRow(ident);
  }

  async listAllocations(filter: AllocationFilter, page: Page): Promise<AllocationRecord[]> {
    const where: string[] = [];
    const params: SqlValue[] = [];
    for (const key of ["node_uuid", "resource_class", "state"] as const) {
      const value = filter[key];
      if (value === undefined) continue;
      where.push(`${key} = ?`);
      params.push(value);
    }
    if (filter.owner !== undefined) {
      where.push("json_extract(doc, '$.owner') = ?");
      params.push(filter.owner);
    }
    const paging = pageClause("allocations", page, ["id", "uuid", "name", "state"]);
    if (paging.where) where.push(paging.where);
    const limit = limitClause(paging.limit);
    const sql = `SELECT doc FROM allocations${where.length ? " WHERE " + where.join(" AND ") : ""} ORDER BY ${paging.order}${limit.sql}`;
    return (this.stmt(sql).all(...params, ...paging.params, ...limit.params) as Row[]).map(
      (r) => JSON.parse(r.doc) as AllocationRecord,
    );
  }

  async updateAllocation(uuid: string, patch: Partial<AllocationRecord>): Promise<AllocationRecord> {
    return this.db.transaction(() => {
      const allocation = this.allocationRow(uuid);
      if (!allocation) throw new NotFound(`Allocation ${uuid} could not be found.`);
      const updated = {
        ...allocation,
        ...patch,
        uuid: allocation.uuid,
        updated_at: new Date().toISOString(),
      };
      this.writeAllocation(updated, false);
      return updated;
    })();
  }

  async deleteAllocation(uuid: string): Promise<void> {
    if (this.stmt("DELETE FROM allocations WHERE uuid = ?").run(uuid).changes === 0) {
      throw new NotFound(`Allocation ${uuid} could not be found.`);
    }
  }

  async claimNode(allocationUuid: string, request: CandidateRequest): Promise<NodeRecord | null> {
    // NOTE: better-sqlite3 transactions are synchronous, so no other claim interleaves with this one;
    // the BEGIN IMMEDIATE also excludes other processes writing the same file.
    const claim = this.db.transaction(() => {
      // named parameters: the candidate list appears twice in the statement (uuid IN … OR name IN …)
      const params: Record<string, SqlValue> = {};
      const query = candidateQuery(request, {
        param: (value) => {
          const key = `p${Object.keys(params).length}`;
          params[key] = value;
          return `@${key}`;
        },
        false: "0",
      });
      const from = query.index === null ? "nodes" : `nodes INDEXED BY ${query.index}`;
      const row = this.stmt(
        `SELECT doc FROM ${from} WHERE ${query.where} ORDER BY ${query.order} LIMIT 1`,
      ).get(params) as Row | undefined;
      if (!row) return null;
      const updated: NodeRecord = {
        ...(JSON.parse(row.doc) as NodeRecord),
        instance_uuid: allocationUuid,
        allocation_uuid: allocationUuid,
        updated_at: new Date().toISOString(),
      };
      this.writeNode(updated, false);
      return updated;
    });
    return claim.immediate();
  }

  async addNodeHistory(entry: NodeHistoryRecord): Promise<void> {
    this.stmt("INSERT INTO node_history (uuid, node_uuid, created_at, doc) VALUES (?, ?, ?, ?)").run(
      entry.uuid,
      entry.node_uuid,
      entry.created_at,
      JSON.stringify(entry),
    );
  }

  async listNodeHistory(
    nodeUuid: string,
    page: { limit?: number; marker?: string },
  ): Promise<NodeHistoryRecord[]> {
    const params: SqlValue[] = [nodeUuid];
    let sql = "SELECT doc FROM node_history WHERE node_uuid = ?";
    if (page.marker !== undefined) {
      sql +=
        " AND (created_at, id) > (SELECT created_at, id FROM node_history WHERE uuid = ? UNION ALL SELECT '', -1 LIMIT 1)";
      params.push(page.marker);
    }
    sql += " ORDER BY created_at, id";
    if (page.limit !== undefined) {
      sql += " LIMIT ?";
      params.push(page.limit);
    }
    return (this.stmt(sql).all(...params) as Row[]).map((r) => JSON.parse(r.doc) as NodeHistoryRecord);
  }

  async getNodeHistory(nodeUuid: string, eventUuid: string): Promise<NodeHistoryRecord | null> {
    const row = this.stmt("SELECT doc FROM node_history WHERE node_uuid = ? AND uuid = ?").get(
      nodeUuid,
      eventUuid,
    ) as Row | undefined;
    return row ? (JSON.parse(row.doc) as NodeHistoryRecord) : null;
  }

  async registerConductor(
    record: ConductorRecord,
    options: { staleBefore: number; retire: readonly string[] },
  ): Promise<void> {
    this.db
      .transaction(() => {
        this.stmt(
          `UPDATE conductors SET online = 0 WHERE hostname = ? AND online = 1
           AND (heartbeat_at < ? OR identity IN (SELECT value FROM json_each(?)))`,
        ).run(record.hostname, options.staleBefore, JSON.stringify(options.retire));
        try {
          this.stmt(
            `INSERT INTO conductors (identity, hostname, conductor_group, drivers, url, machine, pid, created_at, heartbeat_at, online)
             VALUES (@identity, @hostname, @conductor_group, @drivers, @url, @machine, @pid, @created_at, @heartbeat_at, 1)`,
          ).run({
            identity: record.identity,
            hostname: record.hostname,
            conductor_group: record.conductor_group,
            drivers: JSON.stringify(record.drivers),
            url: record.url,
            machine: record.machine,
            pid: record.pid,
            created_at: record.created_at,
            heartbeat_at: record.heartbeat_at,
          });
        } catch (error) {
          if (isUniqueViolation(error)) throw new ConductorAlreadyRegistered(record.hostname);
          throw error;
        }
      })
      .immediate();
  }

  async pruneConductors(identities: readonly string[]): Promise<string[]> {
    if (identities.length === 0) return [];
    const rows = this.stmt(
      `DELETE FROM conductors AS c
        WHERE c.identity IN (SELECT value FROM json_each(?))
          AND EXISTS (SELECT 1 FROM conductors newer WHERE newer.hostname = c.hostname
                        AND (newer.created_at, newer.identity) > (c.created_at, c.identity))
          AND NOT EXISTS (SELECT 1 FROM nodes WHERE nodes.reservation = c.identity)
        RETURNING identity`,
    ).all(JSON.stringify(identities)) as { identity: string }[];
    return rows.map((r) => r.identity);
  }

  async touchConductor(identity: string, at: number, url?: string): Promise<boolean> {
    return (
      this.stmt(
        "UPDATE conductors SET heartbeat_at = ?, url = COALESCE(?, url) WHERE identity = ? AND online = 1",
      ).run(at, url ?? null, identity).changes > 0
    );
  }

  async retireConductor(identity: string): Promise<void> {
    this.stmt("UPDATE conductors SET online = 0 WHERE identity = ?").run(identity);
  }

  async listConductors(): Promise<ConductorRecord[]> {
    const rows = this.stmt("SELECT * FROM conductors ORDER BY created_at, identity").all() as (Omit<
      ConductorRecord,
      "drivers" | "online"
    > & { drivers: string; online: number })[];
    return rows.map((r) => ({ ...r, drivers: JSON.parse(r.drivers) as string[], online: r.online === 1 }));
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
