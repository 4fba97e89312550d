import pg from "pg";
import type { NodeHistoryRecord } from "../../../shared/history.ts";
import type { AllocationRecord, ConductorRecord, NodeRecord, PortRecord } from "../../../shared/resources.ts";
import { isUuid } from "../../../shared/uuid.ts";
import {
  ConductorAlreadyRegistered,
  Duplicate,
  NODE_SORT_KEYS,
  summaryColumns,
  NodeLocked,
  NodeNotFound,
  NotFound,
  type AllocationFilter,
  type NodeFilter,
  type NodeSummary,
  type NodeSummaryField,
  type Page,
  type ReservedNode,
  type PortFilter,
  type Store,
} from "../store.ts";
import { PG_MIGRATIONS } from "./migrations.ts";
import { claimSelect, TRAIT_BATCH } from "./claim-select.ts";
import { storedSummariesJson, type SummaryJsonPage } from "../summary-json.ts";
import { candidateQuery, matchColumns, type CandidateRequest } from "../candidates.ts";

type SqlValue = string | number | boolean | null;
type Queryable = Pick<pg.PoolClient, "query">;

/** Collects `$n` parameters while a statement is built. */
class Params {
  readonly values: SqlValue[] = [];
  add(value: SqlValue): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

// A fixed key, so concurrent first starts of several conductors migrate one after the other.
const MIGRATION_LOCK = 0x616e76696c;

function pgCode(error: unknown): string | undefined {
  return error instanceof Error && "code" in error ? String(error.code) : undefined;
}
function constraintOf(error: unknown): string {
  return error instanceof Error && "constraint" in error ? String(error.constraint) : "";
}

/** Keyset paging: `(sort, id) > (marker's sort, marker's id)`; nullable text columns compare as ''. */
function pageClause(
  table: string,
  page: Page,
  options: { allowedKeys: readonly string[]; params: Params },
): { where: string; order: string; limit: string; key: string } {
  const key = page.sortKey && options.allowedKeys.includes(page.sortKey) ? page.sortKey : "id";
  const dir = page.sortDir === "desc" ? "DESC" : "ASC";
  const cmp = dir === "DESC" ? "<" : ">";
  const expr = key === "id" ? "id" : `COALESCE(${key}::text, '')`;
  let where = "";
  if (page.marker !== undefined) {
    const marker = options.params.add(page.marker);
    where =
      key === "id"
        ? `id ${cmp} (SELECT id FROM ${table} WHERE uuid = ${marker})`
        : `(${expr}, id) ${cmp} (SELECT ${expr}, id FROM ${table} WHERE uuid = ${marker})`;
  }
  const order = key === "id" ? `id ${dir}` : `${expr} ${dir}, id ${dir}`;
  return { where, order, limit: page.limit === undefined ? "" : ` LIMIT ${Math.trunc(page.limit)}`, key };
}

function nodeColumns(node: NodeRecord): Record<string, SqlValue> {
  return {
    uuid: node.uuid,
    name: node.name,
    driver: node.driver,
    provision_state: node.provision_state,
    power_state: node.power_state,
    maintenance: node.maintenance,
    reservation: node.reservation,
    instance_uuid: node.instance_uuid,
    resource_class: node.resource_class,
    conductor_group: node.conductor_group,
    owner: node.owner,
    lessee: node.lessee,
    fault: node.fault,
    retired: node.retired,
    created_at: node.created_at,
    updated_at: node.updated_at,
    ...matchColumns(node),
    doc: JSON.stringify(node),
  };
}

/**
 * The cluster store: PostgreSQL through a connection pool. Row locks (`FOR UPDATE`) make read-modify-write
 * atomic; allocation claims skip rows another claim holds (`SKIP LOCKED`) instead of waiting on them.
 */
export class PgStore implements Store {
  private readonly pool: pg.Pool;
  private readonly ready: Promise<void>;

  constructor(url: string, options: { maxConnections?: number } = {}) {
    const max = options.maxConnections ?? 10;
    // Connections stay open once made, up to 5 (SQLAlchemy's pool_size, which Ironic keeps): the pool's
    // default closed every one idle for 10 s, and the next burst of requests waited on new backends.
    this.pool = new pg.Pool({ connectionString: url, max, min: Math.min(5, max) });
    // an idle client's error (server restart) must not crash the process; the next query reports it
    this.pool.on("error", () => undefined);
    this.ready = this.migrate();
    this.ready.catch(() => undefined);
  }

  /** Resolves once the schema is current. @throws the connection or migration error */
  async open(): Promise<void> {
    await this.ready;
  }

  private async migrate(): Promise<void> {
    await this.inTransaction(async (client) => {
      await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
      await client.query("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
      const row = await client.query<{ version: number }>("SELECT version FROM schema_version");
      let version = row.rows[0]?.version ?? 0;
      if (row.rows.length === 0) await client.query("INSERT INTO schema_version VALUES (0)");
      for (; version < PG_MIGRATIONS.length; version++) {
        await client.query(PG_MIGRATIONS[version] ?? "");
        await client.query("UPDATE schema_version SET version = $1", [version + 1]);
      }
    }, false);
  }

  private async query<R extends pg.QueryResultRow>(
    sql: string,
    params: readonly SqlValue[] = [],
  ): Promise<pg.QueryResult<R>> {
    await this.ready;
    return this.pool.query<R>(sql, params as SqlValue[]);
  }

  private async inTransaction<T>(work: (client: Queryable) => Promise<T>, waitReady = true): Promise<T> {
    if (waitReady) await this.ready;
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN");
      const result = await work(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  private async writeNode(db: Queryable, node: NodeRecord, insert: boolean): Promise<void> {
    const cols = nodeColumns(node);
    const names = Object.keys(cols);
    const values = Object.values(cols);
    try {
      if (insert) {
        await db.query(
          `INSERT INTO nodes (${names.join(",")}) VALUES (${names.map((_, i) => `$${i + 1}`).join(",")})`,
          values,
        );
      } else {
        const sets = names.map((n, i) => `${n} = $${i + 1}`).filter((_, i) => names[i] !== "uuid");
        await db.query(`UPDATE nodes SET ${sets.join(",")} WHERE uuid = $1`, values);
        await db.query("DELETE FROM node_traits WHERE node_uuid = $1", [node.uuid]);
      }
      if (node.traits.length > 0) {
        await db.query(
          "INSERT INTO node_traits (node_uuid, trait) SELECT $1, t FROM unnest($2::text[]) AS t ON CONFLICT DO NOTHING",
          [node.uuid, node.traits as unknown as SqlValue],
        );
      }
    } catch (error) {
      if (pgCode(error) === "23505") {
        const constraint = constraintOf(error);
        if (constraint.includes("name")) throw new Duplicate(`A node with name ${node.name} already exists.`);
        if (constraint.includes("instance_uuid"))
          throw new Duplicate(`Instance ${node.instance_uuid} is already associated with a node.`);
        throw new Duplicate(`A node with UUID ${node.uuid} already exists.`);
      }
      throw error;
    }
  }

  private async nodeRow(db: Queryable, ident: string, forUpdate = false): Promise<NodeRecord | null> {
    const column = isUuid(ident) ? "uuid" : "name";
    const result = await db.query<{ doc: NodeRecord }>(
      `SELECT doc FROM nodes WHERE ${column} = $1${forUpdate ? " FOR UPDATE" : ""}`,
      [ident],
    );
    return result.rows[0]?.doc ?? null;
  }

  async createNode(node: NodeRecord): Promise<NodeRecord> {
    await this.ready;
    await this.writeNode(this.pool, node, true);
    return node;
  }

  async getNode(ident: string): Promise<NodeRecord | null> {
    await this.ready;
    return this.nodeRow(this.pool, ident);
  }

  /** WHERE (its parameters added to `params`) and paging of a node list. */
  private nodeConditions(
    filter: NodeFilter,
    page: Page,
    params: Params,
  ): { where: string; paging: ReturnType<typeof pageClause> } {
    const where: string[] = [];
    const eq = (column: string, value: SqlValue | undefined): void => {
      if (value !== undefined) where.push(`${column} = ${params.add(value)}`);
    };
    eq("provision_state", filter.provision_state);
    eq("maintenance", filter.maintenance);
    eq("retired", filter.retired);
    eq("resource_class", filter.resource_class);
    eq("driver", filter.driver);
    eq("conductor_group", filter.conductor_group);
    eq("instance_uuid", filter.instance_uuid);
    eq("fault", filter.fault);
    eq("owner", filter.owner);
    eq("lessee", filter.lessee);
    eq("reservation", filter.reservation);
    if (filter.reserved !== undefined) where.push(`reservation IS ${filter.reserved ? "NOT " : ""}NULL`);
    if (filter.project !== undefined) {
      const project = params.add(filter.project);
      where.push(`(owner = ${project} OR lessee = ${project})`);
    }
    if (filter.associated !== undefined)
      where.push(`instance_uuid IS ${filter.associated ? "NOT " : ""}NULL`);
    const paging = pageClause("nodes", page, { allowedKeys: NODE_SORT_KEYS, params });
    if (paging.where) where.push(paging.where);
    return { where: where.length ? ` WHERE ${where.join(" AND ")}` : "", paging };
  }

  private async nodeQuery<R extends pg.QueryResultRow>(
    select: string,
    filter: NodeFilter,
    page: Page,
  ): Promise<R[]> {
    const params = new Params();
    const { where, paging } = this.nodeConditions(filter, page, params);
    const sql = `SELECT ${select} FROM nodes${where} ORDER BY ${paging.order}${paging.limit}`;
    return (await this.query<R>(sql, params.values)).rows;
  }

  async listNodes(filter: NodeFilter, page: Page): Promise<NodeRecord[]> {
    return (await this.nodeQuery<{ doc: NodeRecord }>("doc", filter, page)).map((r) => r.doc);
  }

  async listNodeSummaries<F extends NodeSummaryField = NodeSummaryField>(
    filter: NodeFilter,
    page: Page,
    columns?: readonly F[],
  ): Promise<Pick<NodeSummary, F | "uuid">[]> {
    return this.nodeQuery<Pick<NodeSummary, F | "uuid">>(summaryColumns(columns).join(","), filter, page);
  }

  async listNodeSummaryJson(filter: NodeFilter, page: Page, linkBase: string): Promise<SummaryJsonPage> {
    await this.ready;
    const params = new Params();
    const { where, paging } = this.nodeConditions(filter, page, params);
    // each node's object is kept by PostgreSQL (nodes.list_json): two values a row, no JSON written here
    const result = await this.pool.query<[string, string]>({
      text: `SELECT uuid, list_json FROM nodes${where} ORDER BY ${paging.order}${paging.limit}`,
      values: params.values,
      rowMode: "array",
    });
    const rows = result.rows;
    return {
      json: storedSummariesJson(rows, linkBase),
      count: rows.length,
      lastUuid: rows.at(-1)?.[0] ?? null,
    };
  }

  async listOrphanedBoots(options: {
    waitStates: readonly string[];
    live: readonly string[];
  }): Promise<NodeRecord[]> {
    const result = await this.query<{ doc: NodeRecord }>(
      `SELECT doc FROM nodes WHERE ramdisk_prepared_by IS NOT NULL AND ramdisk_prepared_by <> ALL($1::text[])
         AND provision_state = ANY($2::text[])
       UNION ALL
       SELECT doc FROM nodes WHERE instance_prepared_by IS NOT NULL AND instance_prepared_by <> ALL($1::text[])
         AND provision_state = 'active'`,
      [options.live as unknown as SqlValue, options.waitStates as unknown as SqlValue],
    );
    return result.rows.map((r) => r.doc);
  }

  async countNodesBy(column: "provision_state" | "power_state" | "fault"): Promise<Record<string, number>> {
    // the column comes from a closed union, never from a request
    const result = await this.query<{ value: string; n: string }>(
      `SELECT COALESCE(${column}, 'none') AS value, COUNT(*) AS n FROM nodes GROUP BY ${column}`,
    );
    return Object.fromEntries(result.rows.map((r) => [r.value, Number(r.n)]));
  }

  async addNodeHistory(entry: NodeHistoryRecord): Promise<void> {
    await this.query("INSERT INTO node_history (uuid, node_uuid, created_at, doc) VALUES ($1, $2, $3, $4)", [
      entry.uuid,
      entry.node_uuid,
      entry.created_at,
      JSON.stringify(entry),
    ]);
  }

  async listNodeHistory(
    nodeUuid: string,
    page: { limit?: number; marker?: string },
  ): Promise<NodeHistoryRecord[]> {
    const params = new Params();
    let sql = `SELECT doc FROM node_history WHERE node_uuid = ${params.add(nodeUuid)}`;
    if (page.marker !== undefined) {
      sql += ` AND (created_at, id) > (SELECT created_at, id FROM node_history WHERE uuid = ${params.add(page.marker)} UNION ALL SELECT '', -1 LIMIT 1)`;
    }
    sql += " ORDER BY created_at, id";
    if (page.limit !== undefined) sql += ` LIMIT ${params.add(page.limit)}`;
    return (await this.query<{ doc: NodeHistoryRecord }>(sql, params.values)).rows.map((r) => r.doc);
  }

  async getNodeHistory(nodeUuid: string, eventUuid: string): Promise<NodeHistoryRecord | null> {
    const result = await this.query<{ doc: NodeHistoryRecord }>(
      "SELECT doc FROM node_history WHERE node_uuid = $1 AND uuid = $2",
      [nodeUuid, eventUuid],
    );
    return result.rows[0]?.doc ?? null;
  }

  async countNodesByState(): Promise<Record<string, number>> {
    const result = await this.query<{ provision_state: string; n: string }>(
      "SELECT provision_state, COUNT(*) AS n FROM nodes GROUP BY provision_state",
    );
    return Object.fromEntries(result.rows.map((r) => [r.provision_state, Number(r.n)]));
  }

  async updateNode(
    uuid: string,
    patch: Partial<NodeRecord>,
    options: { ifReservedBy?: string | null } = {},
  ): Promise<NodeRecord> {
    return this.inTransaction(async (db) => {
      const node = await this.nodeRow(db, uuid, true);
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
      await this.writeNode(db, updated, false);
      return updated;
    });
  }

  async deleteNode(uuid: string): Promise<void> {
    const result = await this.query("DELETE FROM nodes WHERE uuid = $1", [uuid]);
    if (result.rowCount === 0) throw new NodeNotFound(uuid);
  }

  /** One statement: the row lock makes the test-and-set atomic without a round trip per step. */
  private async setReservation(
    uuid: string,
    change: { from: string | null; to: string | null },
  ): Promise<NodeRecord | null> {
    const params = new Params();
    const to = params.add(change.to);
    const id = params.add(uuid);
    const guard = change.from === null ? "reservation IS NULL" : `reservation = ${params.add(change.from)}`;
    const result = await this.query<{ doc: NodeRecord }>(
      `UPDATE nodes SET reservation = ${to}::text, doc = doc || jsonb_build_object('reservation', ${to}::text)
       WHERE uuid = ${id} AND ${guard} RETURNING doc`,
      params.values,
    );
    return result.rows[0]?.doc ?? null;
  }

  async reserveNode(uuid: string, holder: string): Promise<NodeRecord> {
    const reserved = await this.setReservation(uuid, { from: null, to: holder });
    if (reserved) return reserved;
    const node = await this.getNode(uuid);
    if (!node) throw new NodeNotFound(uuid);
    throw new NodeLocked(node.uuid, node.reservation);
  }

  async releaseNode(uuid: string, holder: string): Promise<void> {
    await this.setReservation(uuid, { from: holder, to: null });
  }

  async releaseAllReservations(holder: string): Promise<string[]> {
    const result = await this.query<{ uuid: string }>(
      `UPDATE nodes SET reservation = NULL, doc = doc || '{"reservation": null}'::jsonb
       WHERE reservation = $1 RETURNING uuid`,
      [holder],
    );
    return result.rows.map((r) => r.uuid);
  }

  async listReservedBy(holders: readonly string[]): Promise<ReservedNode[]> {
    if (holders.length === 0) return [];
    const result = await this.query<ReservedNode>(
      "SELECT uuid, reservation, conductor_group FROM nodes WHERE reservation = ANY($1::text[])",
      [holders as unknown as SqlValue],
    );
    return result.rows;
  }

  async getAgentToken(uuid: string): Promise<{ digest: string; bootId: string } | null> {
    const result = await this.query<{ digest: string; boot_id: string }>(
      "SELECT digest, boot_id FROM agent_tokens WHERE node_uuid = $1",
      [uuid],
    );
    const row = result.rows[0];
    return row ? { digest: row.digest, bootId: row.boot_id } : null;
  }

  async setAgentToken(uuid: string, record: { digest: string; bootId: string } | null): Promise<void> {
    if (record === null) {
      await this.query("DELETE FROM agent_tokens WHERE node_uuid = $1", [uuid]);
      return;
    }
    await this.query(
      `INSERT INTO agent_tokens (node_uuid, digest, boot_id) VALUES ($1, $2, $3)
       ON CONFLICT (node_uuid) DO UPDATE SET digest = excluded.digest, boot_id = excluded.boot_id`,
      [uuid, record.digest, record.bootId],
    );
  }

  async saveInventory(uuid: string, inventory: unknown): Promise<void> {
    await this.query(
      `INSERT INTO inventories (node_uuid, doc) VALUES ($1, $2)
       ON CONFLICT (node_uuid) DO UPDATE SET doc = excluded.doc`,
      [uuid, JSON.stringify(inventory)],
    );
  }

  async getInventory(uuid: string): Promise<unknown> {
    const result = await this.query<{ doc: unknown }>("SELECT doc FROM inventories WHERE node_uuid = $1", [
      uuid,
    ]);
    return result.rows[0]?.doc ?? null;
  }

  private async writePort(db: Queryable, port: PortRecord, insert: boolean): Promise<void> {
    const values = [port.uuid, port.address, port.node_uuid, JSON.stringify(port)];
    try {
      await db.query(
        insert
          ? "INSERT INTO ports (uuid, address, node_uuid, doc) VALUES ($1, $2, $3, $4)"
          : "UPDATE ports SET address = $2, node_uuid = $3, doc = $4 WHERE uuid = $1",
        values,
      );
    } catch (error) {
      if (pgCode(error) === "23505") {
        if (constraintOf(error).includes("address"))
          throw new Duplicate(`A port with MAC address ${port.address} already exists.`);
        throw new Duplicate(`A port with UUID ${port.uuid} already exists.`);
      }
      if (pgCode(error) === "23503") throw new NodeNotFound(port.node_uuid);
      throw error;
    }
  }

  async createPort(port: PortRecord): Promise<PortRecord> {
    await this.ready;
    await this.writePort(this.pool, port, true);
    return port;
  }

  async getPort(uuid: string): Promise<PortRecord | null> {
    const result = await this.query<{ doc: PortRecord }>("SELECT doc FROM ports WHERE uuid = $1", [uuid]);
    return result.rows[0]?.doc ?? null;
  }

  async listPorts(filter: PortFilter, page: Page): Promise<PortRecord[]> {
    const params = new Params();
    const where: string[] = [];
    if (filter.node_uuid !== undefined) where.push(`node_uuid = ${params.add(filter.node_uuid)}`);
    if (filter.address !== undefined) where.push(`address = ${params.add(filter.address)}`);
    if (filter.project !== undefined) {
      const project = params.add(filter.project);
      where.push(`node_uuid IN (SELECT uuid FROM nodes WHERE owner = ${project} OR lessee = ${project})`);
    }
    const paging = pageClause("ports", page, { allowedKeys: ["id", "uuid", "address"], params });
    if (paging.where) where.push(paging.where);
    const sql = `SELECT doc FROM ports${where.length ? " WHERE " + where.join(" AND ") : ""} ORDER BY ${paging.order}${paging.limit}`;
    return (await this.query<{ doc: PortRecord }>(sql, params.values)).rows.map((r) => r.doc);
  }

  async updatePort(uuid: string, patch: Partial<PortRecord>): Promise<PortRecord> {
    return this.inTransaction(async (db) => {
      const result = await db.query<{ doc: PortRecord }>("SELECT doc FROM ports WHERE uuid = $1 FOR UPDATE", [
        uuid,
      ]);
      const port = result.rows[0]?.doc;
      if (!port) throw new NotFound(`Port ${uuid} could not be found.`);
      const updated = { ...port, ...patch, uuid, updated_at: new Date().toISOString() };
      await this.writePort(db, updated, false);
      return updated;
    });
  }

  async deletePort(uuid: string): Promise<void> {
    if ((await this.query("DELETE FROM ports WHERE uuid = $1", [uuid])).rowCount === 0) {
      throw new NotFound(`Port ${uuid} could not be found.`);
    }
  }

  private async writeAllocation(db: Queryable, allocation: AllocationRecord, insert: boolean): Promise<void> {
    const values = [
      allocation.uuid,
      allocation.name,
      allocation.state,
      allocation.node_uuid,
      allocation.resource_class,
      JSON.stringify(allocation),
    ];
    try {
      await db.query(
        insert
          ? "INSERT INTO allocations (uuid, name, state, node_uuid, resource_class, doc) VALUES ($1, $2, $3, $4, $5, $6)"
          : "UPDATE allocations SET name = $2, state = $3, node_uuid = $4, resource_class = $5, doc = $6 WHERE uuid = $1",
        values,
      );
    } catch (error) {
      if (pgCode(error) === "23505") {
        throw new Duplicate(
          constraintOf(error).includes("name")
            ? `An allocation with name ${allocation.name} already exists.`
            : `An allocation with UUID ${allocation.uuid} already exists.`,
        );
      }
      throw error;
    }
  }

  async createAllocation(allocation: AllocationRecord): Promise<AllocationRecord> {
    await this.ready;
    await this.writeAllocation(this.pool, allocation, true);
    return allocation;
  }

  private async allocationRow(
    db: Queryable,
    ident: string,
    forUpdate = false,
  ): Promise<AllocationRecord | null> {
    const column = isUuid(ident) ? "uuid" : "name";
    const result = await db.query<{ doc: AllocationRecord }>(
      `SELECT doc FROM allocations WHERE ${column} = $1${forUpdate ? " FOR UPDATE" : ""}`,
      [ident],
    );
    return result.rows[0]?.doc ?? null;
  }

  async getAllocation(ident: string): Promise<AllocationRecord | null> {
    await this.ready;
    return this.allocationRow(this.pool, ident);
  }

  async listAllocations(filter: AllocationFilter, page: Page): Promise<AllocationRecord[]> {
    const params = new Params();
    const where: string[] = [];
    for (const key of ["node_uuid", "resource_class", "state"] as const) {
      const value = filter[key];
      if (value !== undefined) where.push(`${key} = ${params.add(value)}`);
    }
    if (filter.owner !== undefined) where.push(`doc->>'owner' = ${params.add(filter.owner)}`);
    const paging = pageClause("allocations", page, { allowedKeys: ["id", "uuid", "name", "state"], params });
    if (paging.where) where.push(paging.where);
    const sql = `SELECT doc FROM allocations${where.length ? " WHERE " + where.join(" AND ") : ""} ORDER BY ${paging.order}${paging.limit}`;
    return (await this.query<{ doc: AllocationRecord }>(sql, params.values)).rows.map((r) => r.doc);
  }

  async updateAllocation(uuid: string, patch: Partial<AllocationRecord>): Promise<AllocationRecord> {
    await this.ready;
    const changes: Record<string, unknown> = { ...patch, updated_at: new Date().toISOString() };
    delete changes.uuid;
    // a key patched to undefined leaves the document, as it does when the merged record is serialised
    const dropped = Object.keys(changes).filter((key) => changes[key] === undefined);
    const column = isUuid(uuid) ? "uuid" : "name";
    // One statement (one round trip, no BEGIN/COMMIT): the row lock of the UPDATE serialises writers, and
    // every expression reads the row as it was, so the indexed columns follow the merged document.
    const merged = "((doc - $3::text[]) || $2::jsonb)";
    try {
      const result = await this.query<{ doc: AllocationRecord }>(
        `UPDATE allocations SET doc = ${merged}, name = ${merged}->>'name', state = ${merged}->>'state',
           node_uuid = ${merged}->>'node_uuid', resource_class = ${merged}->>'resource_class'
         WHERE ${column} = $1 RETURNING doc`,
        [uuid, JSON.stringify(changes), dropped as unknown as SqlValue],
      );
      const updated = result.rows[0]?.doc;
      if (!updated) throw new NotFound(`Allocation ${uuid} could not be found.`);
      return updated;
    } catch (error) {
      if (pgCode(error) === "23505") {
        throw new Duplicate(`An allocation with name ${String(patch.name)} already exists.`);
      }
      throw error;
    }
  }

  async deleteAllocation(uuid: string): Promise<void> {
    if ((await this.query("DELETE FROM allocations WHERE uuid = $1", [uuid])).rowCount === 0) {
      throw new NotFound(`Allocation ${uuid} could not be found.`);
    }
  }

  async claimNode(allocationUuid: string, request: CandidateRequest): Promise<NodeRecord | null> {
    await this.ready;
    const params = new Params();
    const query = candidateQuery(request, {
      param: (value) => params.add(value),
      false: "FALSE",
      traitRows: true,
    });
    const instance = params.add(allocationUuid);
    const now = params.add(new Date().toISOString());
    // One statement, so one round trip and no BEGIN/COMMIT: the CTE locks the chosen row and the UPDATE writes
    // only what a claim changes (traits and matching columns are untouched). A row another claim holds is
    // skipped, not waited for, so racing clients never queue behind each other.
    const claim = async (batch: number | null) => {
      const result = await this.pool.query<{ doc: NodeRecord }>(
        `WITH chosen AS (${claimSelect(query, batch)})
         UPDATE nodes SET instance_uuid = ${instance}, updated_at = ${now},
           doc = nodes.doc || jsonb_build_object('instance_uuid', ${instance}::text,
             'allocation_uuid', ${instance}::text, 'updated_at', ${now}::text)
         FROM chosen WHERE nodes.id = chosen.id
         RETURNING nodes.doc`,
        params.values,
      );
      return result.rows[0]?.doc ?? null;
    };
    try {
      // NOTE: a trait's first rows can all be held by racing claims or reserved (the mirror leaves reservations
      // out); only then are all of its claimable rows read, so a claim never misses a node that is free
      if (query.traitWalk === null) return await claim(null);
      return (await claim(TRAIT_BATCH)) ?? (await claim(null));
    } catch (error) {
      if (pgCode(error) === "23505")
        throw new Duplicate(`Instance ${allocationUuid} is already associated with a node.`);
      throw error;
    }
  }

  async registerConductor(
    record: ConductorRecord,
    options: { staleBefore: number; retire: readonly string[] },
  ): Promise<void> {
    await this.inTransaction(async (db) => {
      await db.query(
        `UPDATE conductors SET online = FALSE WHERE hostname = $1 AND online
         AND (heartbeat_at < $2 OR identity = ANY($3::text[]))`,
        [record.hostname, options.staleBefore, options.retire],
      );
      try {
        await db.query(
          `INSERT INTO conductors (identity, hostname, conductor_group, drivers, url, machine, pid, created_at, heartbeat_at, online)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, TRUE)`,
          [
            record.identity,
            record.hostname,
            record.conductor_group,
            JSON.stringify(record.drivers),
            record.url,
            record.machine,
            record.pid,
            record.created_at,
            record.heartbeat_at,
          ],
        );
      } catch (error) {
        if (pgCode(error) === "23505") throw new ConductorAlreadyRegistered(record.hostname);
        throw error;
      }
    });
  }

  async pruneConductors(identities: readonly string[]): Promise<string[]> {
    if (identities.length === 0) return [];
    const result = await this.query<{ identity: string }>(
      `DELETE FROM conductors c
        WHERE c.identity = ANY($1::text[])
          AND EXISTS (SELECT 1 FROM conductors newer WHERE newer.hostname = c.hostname
                        AND (newer.created_at, newer.identity) > (c.created_at, c.identity))
          AND NOT EXISTS (SELECT 1 FROM nodes WHERE nodes.reservation = c.identity)
        RETURNING c.identity`,
      [identities as unknown as SqlValue],
    );
    return result.rows.map((r) => r.identity);
  }

  async touchConductor(identity: string, at: number, url?: string): Promise<boolean> {
    const result = await this.query(
      "UPDATE conductors SET heartbeat_at = $1, url = COALESCE($3, url) WHERE identity = $2 AND online",
      [at, identity, url ?? null],
    );
    return (result.rowCount ?? 0) > 0;
  }

  async retireConductor(identity: string): Promise<void> {
    await this.query("UPDATE conductors SET online = FALSE WHERE identity = $1", [identity]);
  }

  async listConductors(): Promise<ConductorRecord[]> {
    const result = await this.query<Omit<ConductorRecord, "heartbeat_at"> & { heartbeat_at: string }>(
      "SELECT * FROM conductors ORDER BY created_at, identity",
    );
    // BIGINT arrives as a string (it may exceed 2^53; epoch milliseconds do not)
    return result.rows.map((r) => ({ ...r, heartbeat_at: Number(r.heartbeat_at) }));
  }

  async close(): Promise<void> {
    await this.ready.catch(() => undefined);
    await this.pool.end();
  }
}
