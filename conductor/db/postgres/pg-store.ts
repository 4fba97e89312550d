import pg from "pg";
import type { Dialect, Executor, SqlValue } from "../sql/dialect.ts";
import { SqlStore } from "../sql/sql-store.ts";
import type { RawRows } from "../sql/raw-rows.ts";
import { PageBuffers } from "../../page-buffers.ts";
import { claimSelect } from "./claim-select.ts";
import { binaryCopyRows } from "./copy-binary.ts";
import { copyOut } from "./copy-out.ts";
import { inlineParams } from "./inline-params.ts";
import { PG_MIGRATIONS } from "./migrations.ts";

// A fixed key, so concurrent first starts of several conductors migrate one after the other.
const MIGRATION_LOCK = 0x616e76696c;

/** An Executor over one pg client or the pool. */
function executor(db: Pick<pg.PoolClient, "query">): Executor {
  return {
    all: async <R>(sql: string, params: readonly SqlValue[], options: { raw?: boolean } = {}) => {
      const values = params as unknown[];
      if (options.raw !== true) return (await db.query({ text: sql, values })).rows as R[];
      return (await db.query({ text: sql, values, rowMode: "array" })).rows as R[];
    },
    run: async (sql, params) => (await db.query(sql, params as unknown[])).rowCount ?? 0,
  };
}

/**
 * PostgreSQL through a connection pool. Row locks (`FOR UPDATE`) make read-modify-write atomic; allocation
 * claims skip rows another claim holds (`SKIP LOCKED`) instead of waiting on them.
 */
class PgDialect implements Dialect {
  private readonly pool: pg.Pool;
  private readonly pooled: Executor;
  /** Where COPYs are read into: a detail page's 1.6 MB, fresh memory every page otherwise (page-buffers.ts) */
  private readonly buffers = new PageBuffers();
  readonly ready: Promise<void>;
  readonly true = "TRUE";
  readonly false = "FALSE";
  readonly forUpdate = " FOR UPDATE";
  readonly traitRows = true;
  readonly joinsPages = false;
  // NOTE: parent_node is a stored column, so the test costs nothing per row read; its form is for the planner.
  // Until autovacuum first analyses a freshly filled table, PostgreSQL guesses that `parent_node IS NULL` keeps
  // 0.5 % of the rows (so a page of 1,000 "needs" every node: it scans and sorts them all), and the NOT IN form
  // reads the children by a sequential scan of every node. Its guess for a boolean expression it has no
  // statistics on is 50 %, with or without table statistics: the page walks the primary key and stops at its
  // limit. EXPLAIN ANALYZE at 20,000 nodes without statistics: 0.5-1.2 ms and 991 buffers a page, where NOT IN
  // took 10-35 ms and 5,994 buffers and the bare IS NULL 52 ms.
  readonly noChildren = "COALESCE(parent_node IS NULL, TRUE)";

  constructor(url: string, options: { maxConnections?: number }) {
    const max = options.maxConnections ?? 10;
    // Connections stay open once made, up to 5 (SQLAlchemy's pool_size, which Ironic keeps): the pool's
    // default closed every one idle for 10 s, and the next burst of requests waited on new backends.
    this.pool = new pg.Pool({ connectionString: url, max, min: Math.min(5, max) });
    // an idle client's error (server restart) must not crash the process; the next query reports it
    this.pool.on("error", () => undefined);
    this.pooled = executor(this.pool);
    this.ready = this.inTransaction(async (db) => {
      await db.run("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
      await db.run("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)", []);
      const [row] = await db.all<{ version: number }>("SELECT version FROM schema_version", []);
      if (row === undefined) await db.run("INSERT INTO schema_version VALUES (0)", []);
      for (let version = row?.version ?? 0; version < PG_MIGRATIONS.length; version++) {
        await db.run(PG_MIGRATIONS[version] ?? "", []);
        await db.run("UPDATE schema_version SET version = $1", [version + 1]);
      }
    });
    this.ready.catch(() => undefined);
  }

  private async inTransaction<T>(work: (db: Executor) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN");
      const result = await work(executor(client));
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  // NOTE: each write keeps its own statement on the pool: grouping would hold one connection per group and
  // order the writes behind each other, where the pool now runs them side by side
  grouped<T>(work: (db: Executor) => Promise<T>): Promise<T> {
    return work(this);
  }

  async all<R>(sql: string, params: readonly SqlValue[], options?: { raw?: boolean }): Promise<R[]> {
    await this.ready;
    return this.pooled.all<R>(sql, params, options);
  }

  // NOTE: pg makes a string of every field it reads; a detail page's 1,000 shown texts (1.5 MB) cost the
  // conductor 3.3-3.6 ms of CPU that way, 1.2 ms as one binary COPY (PostgreSQL's own CPU 1.7 against 1.6 ms)
  async rawRows(sql: string, params: readonly SqlValue[], columns: number): Promise<RawRows | null> {
    const text = inlineParams(sql, params);
    if (text === null) return null;
    await this.ready;
    const client = await this.pool.connect();
    let failed: Error | undefined;
    try {
      const { buffer, size } = await copyOut(
        client,
        `COPY (${text}) TO STDOUT (FORMAT binary)`,
        this.buffers,
      );
      try {
        return {
          ...binaryCopyRows(buffer.subarray(0, size), columns),
          release: () => this.buffers.give(buffer),
        };
      } catch (error) {
        this.buffers.give(buffer);
        throw error;
      }
    } catch (error) {
      // PostgreSQL's error leaves the connection ready; a COPY read wrong (binaryCopyRows) retires it
      if (!(error instanceof pg.DatabaseError))
        failed = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      client.release(failed);
    }
  }

  async run(sql: string, params: readonly SqlValue[]): Promise<number> {
    await this.ready;
    return this.pooled.run(sql, params);
  }

  async transaction<T>(work: (db: Executor) => Promise<T>): Promise<T> {
    await this.ready;
    return this.inTransaction(work);
  }

  readonly placeholder = (index: number): string => `$${index}`;
  readonly bool = (value: boolean): SqlValue => value;
  readonly doc = <T>(value: unknown): T => value as T;
  readonly list = (values: readonly string[]): SqlValue => values;
  readonly inList = (column: string, list: string): string => `${column} = ANY(${list}::text[])`;
  readonly rows = (list: string): string => `unnest(${list}::text[]) AS value`;
  readonly jsonText = (column: string, key: string): string => `${column}->>'${key}'`;
  readonly contains = (expr: string, part: string): string => `strpos(lower(${expr}), lower(${part})) > 0`;
  readonly jsonIsTrue = (column: string, key: string): string => `(${column} -> '${key}') = 'true'::jsonb`;
  readonly path = (keys: readonly string[]): SqlValue => keys;
  readonly jsonSet = (expr: string, path: string, json: string): string =>
    `jsonb_set(${expr}, ${path}::text[], ${json}::jsonb)`;
  readonly sameDoc = (column: string, text: string): string => `${column} = ${text}::jsonb`;
  readonly jsonRemove = (expr: string, path: string): string => `(${expr} #- ${path}::text[])`;
  readonly indexedBy = (): string => "";
  readonly claimSelect = claimSelect;
  violation(error: unknown): { kind: "unique" | "foreign"; detail: string } | null {
    const code = error instanceof Error && "code" in error ? String(error.code) : "";
    const detail = error instanceof Error && "constraint" in error ? String(error.constraint) : "";
    if (code === "23505") return { kind: "unique", detail };
    return code === "23503" ? { kind: "foreign", detail } : null;
  }
  async close(): Promise<void> {
    await this.ready.catch(() => undefined);
    await this.pool.end();
  }
}

/** The cluster store: PostgreSQL, shared by every conductor. */
export class PgStore extends SqlStore<PgDialect> {
  constructor(url: string, options: { maxConnections?: number } = {}) {
    super(new PgDialect(url, options));
  }

  /** Resolves once the schema is current. @throws the connection or migration error */
  async open(): Promise<void> {
    await this.d.ready;
  }
}
