import Database from "better-sqlite3";
import type { CandidateQuery } from "../candidates.ts";
import type { Dialect, Executor, SqlValue } from "../sql/dialect.ts";
import { SqlStore } from "../sql/sql-store.ts";
import { MIGRATIONS } from "./migrations.ts";

/**
 * How many prepared statements are kept. Values never reach SQL text (LIMIT too is a parameter), but the
 * filter and sort combinations of list queries still make thousands of distinct texts: the cache keeps
 * the most recently used ones.
 */
export const STATEMENT_CACHE_SIZE = 256;

/**
 * WAL pages written before a commit also checkpoints them into the database file (SQLite's default: 1,000).
 * NOTE: the checkpoint runs inside the COMMIT on the event loop and syncs both files; node creates dirty ~6
 * index and table pages each, so the default checkpointed every ~10 group commits. In-process, 6,000 creates
 * 8 at a time: COMMIT 1.2–1.7 ms each at 1,000 pages, 0.7–0.95 ms at 10,000 (hot index pages are copied
 * back once per checkpoint however often they were rewritten). The WAL file grows to ~40 MiB at most.
 */
const WAL_CHECKPOINT_PAGES = 10_000;

/**
 * SQLite's page cache per connection, in KiB (better-sqlite3 builds SQLite with 16 MiB). NOTE: the cache is
 * resident memory of the conductor, full once the tables outgrow it (10,000 nodes: ~50 MiB of tables); the
 * pages it drops stay in the kernel's file cache and are read back with a pread. The hot pages of
 * a list or detail page of 1,000 nodes (~4 MiB) still fit.
 */
const PAGE_CACHE_KIB = 8192;

/**
 * The names `p1`, `p2`… and placeholders `@p1`, `@p2`… by index, made once: a statement binds up to ~40 of
 * them (a node's INSERT), and a string made per parameter per statement was garbage on every write.
 */
const PARAM_NAMES: string[] = [];
const PLACEHOLDERS: string[] = [];
function paramName(index: number): string {
  return (PARAM_NAMES[index] ??= `p${index}`);
}

/** Parameters by name (`@p1`…): a statement may use one twice, and their order in the text is free. */
function named(params: readonly SqlValue[]): Record<string, SqlValue> {
  const values: Record<string, SqlValue> = {};
  for (let i = 0; i < params.length; i++) values[paramName(i + 1)] = params[i] ?? null;
  return values;
}

/** A write waiting for the next group commit, and how to tell its caller. */
interface Queued {
  work: (db: Executor) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** SQLite through better-sqlite3: synchronous calls behind the async Executor, one connection. */
class SqliteDialect implements Dialect {
  readonly db: Database.Database;
  /** Least recently used first (a Map keeps insertion order; a hit re-inserts). */
  readonly statements = new Map<string, Database.Statement>();
  /** Settles when the open transaction ends; statements of other callers wait for it (one connection). */
  private busy: Promise<void> | null = null;
  /** Writes queued for the group commit that runs once this tick's I/O is handled (null: none queued). */
  private queued: Queued[] | null = null;
  /** Whether migrations ran on a database that had nodes already (derived columns must be filled). */
  readonly migrated: boolean;
  readonly true = "1";
  readonly false = "0";
  readonly forUpdate = "";
  readonly traitRows = false;
  readonly joinsPages = true;
  // NOTE: parent_node is a virtual column here: `parent_node IS NULL` would parse every row's document, so the
  // (small, usually empty) set of children is read once per query from the partial index instead
  readonly noChildren = "uuid NOT IN (SELECT uuid FROM nodes WHERE parent_node IS NOT NULL)";

  constructor(path: string) {
    this.db = new Database(path);
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("synchronous = NORMAL");
    this.db.pragma(`wal_autocheckpoint = ${WAL_CHECKPOINT_PAGES}`);
    this.db.pragma("foreign_keys = ON");
    this.db.pragma("busy_timeout = 5000");
    this.db.pragma(`cache_size = -${PAGE_CACHE_KIB}`);
    const version = this.db.pragma("user_version", { simple: true }) as number;
    for (let i = version; i < MIGRATIONS.length; i++) {
      this.db.transaction(() => {
        this.db.exec(MIGRATIONS[i] ?? "");
        this.db.pragma(`user_version = ${i + 1}`);
      })();
    }
    this.migrated = version > 0 && version < MIGRATIONS.length;
  }

  /**
   * Prepared statements are reused: preparing costs more than running most of them. A `raw` one returns rows
   * as arrays and is cached apart from the keyed-row statement of the same text.
   */
  private stmt(sql: string, raw = false): Database.Statement {
    const key = raw ? `raw\u0000${sql}` : sql;
    let statement = this.statements.get(key);
    if (statement) {
      this.statements.delete(key);
    } else {
      statement = this.db.prepare(sql);
      if (raw) statement.raw(true);
      if (this.statements.size >= STATEMENT_CACHE_SIZE) {
        const oldest = this.statements.keys().next().value;
        if (oldest !== undefined) this.statements.delete(oldest);
      }
    }
    this.statements.set(key, statement);
    return statement;
  }

  private readonly now: Executor = {
    all: async <R>(sql: string, params: readonly SqlValue[], options: { raw?: boolean } = {}) => {
      return this.stmt(sql, options.raw === true).all(named(params)) as R[];
    },
    run: async (sql, params) => this.stmt(sql).run(named(params)).changes,
  };

  async all<R>(sql: string, params: readonly SqlValue[], options?: { raw?: boolean }): Promise<R[]> {
    while (this.busy) await this.busy;
    return this.now.all<R>(sql, params, options);
  }

  async run(sql: string, params: readonly SqlValue[]): Promise<number> {
    while (this.busy) await this.busy;
    return this.now.run(sql, params);
  }

  /** Transaction control statements, prepared once: `exec` parses its text again on every call. */
  private readonly controls = new Map<string, Database.Statement>();
  private control(
    sql: "BEGIN IMMEDIATE" | "COMMIT" | "ROLLBACK" | `${"SAVEPOINT" | "RELEASE" | "ROLLBACK TO"} grouped`,
  ) {
    let statement = this.controls.get(sql);
    if (statement === undefined) {
      statement = this.db.prepare(sql);
      this.controls.set(sql, statement);
    }
    statement.run();
  }

  /** BEGIN IMMEDIATE: the write lock first, so no other process writes between this one's read and write. */
  async transaction<T>(work: (db: Executor) => Promise<T>): Promise<T> {
    while (this.busy) await this.busy;
    let done = (): void => undefined;
    this.busy = new Promise((resolve) => (done = resolve));
    try {
      this.control("BEGIN IMMEDIATE");
      const result = await work(this.now);
      this.control("COMMIT");
      return result;
    } catch (error) {
      if (this.db.inTransaction) this.control("ROLLBACK");
      throw error;
    } finally {
      this.busy = null;
      done();
    }
  }

  /**
   * Group commit: the writes queued in one tick share one transaction, so the index pages they touch are
   * written to the WAL (and checkpointed) once per group instead of once per write. Each runs in its own
   * savepoint (one that throws is undone alone); every caller is answered after the COMMIT.
   */
  grouped<T>(work: (db: Executor) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.queued === null) {
        this.queued = [];
        setImmediate(() => void this.commitQueued());
      }
      this.queued.push({ work, resolve: resolve as (value: unknown) => void, reject });
    });
  }

  private async commitQueued(): Promise<void> {
    const queued = this.queued ?? [];
    this.queued = null;
    const outcomes: { ok: boolean; value: unknown }[] = [];
    if (queued.length === 1) {
      // alone: the transaction is its savepoint
      const [{ work, resolve, reject }] = queued as [Queued];
      return this.transaction(work).then(resolve, reject);
    }
    try {
      await this.transaction(async (db) => {
        for (const { work } of queued) {
          this.control("SAVEPOINT grouped");
          try {
            outcomes.push({ ok: true, value: await work(db) });
          } catch (error) {
            this.control("ROLLBACK TO grouped");
            outcomes.push({ ok: false, value: error });
          }
          this.control("RELEASE grouped");
        }
      });
    } catch (error) {
      for (const { reject } of queued) reject(error);
      return;
    }
    queued.forEach(({ resolve, reject }, i) => {
      const outcome = outcomes[i];
      if (outcome?.ok) resolve(outcome.value);
      else reject(outcome?.value);
    });
  }

  readonly placeholder = (index: number): string => (PLACEHOLDERS[index] ??= `@${paramName(index)}`);
  readonly bool = (value: boolean): SqlValue => (value ? 1 : 0);
  readonly doc = <T>(value: unknown): T => JSON.parse(value as string) as T;
  readonly list = (values: readonly string[]): SqlValue => JSON.stringify(values);
  readonly inList = (column: string, list: string): string =>
    `${column} IN (SELECT value FROM json_each(${list}))`;
  readonly rows = (list: string): string => `json_each(${list})`;
  readonly jsonText = (column: string, key: string): string => `json_extract(${column}, '$.${key}')`;
  // json_extract gives 1 for JSON true; a malformed document would make it raise, failing the whole read
  readonly contains = (expr: string, part: string): string => `instr(lower(${expr}), lower(${part})) > 0`;
  readonly jsonIsTrue = (column: string, key: string): string =>
    `CASE WHEN json_valid(${column}) THEN json_extract(${column}, '$.${key}') END = 1`;
  path(keys: readonly string[]): SqlValue {
    if (keys.some((key) => /["\\]/.test(key))) throw new Error(`unsupported JSON key in ${keys.join(".")}`);
    return `$${keys.map((key) => `."${key}"`).join("")}`;
  }
  readonly jsonSet = (expr: string, path: string, json: string): string =>
    `json_set(${expr}, ${path}, json(${json}))`;
  readonly sameDoc = (column: string, text: string): string => `${column} = ${text}`;
  readonly jsonRemove = (expr: string, path: string): string => `json_remove(${expr}, ${path})`;
  readonly indexedBy = (index: string): string => ` INDEXED BY ${index}`;
  /**
   * NOTE: SQLite's planner (with or without ANALYZE) prefers the unique index on instance_uuid (IS NULL looks
   * like a one-row lookup) or a table scan: the free-node index the query names is forced. A single UPDATE
   * statement takes the write lock before it reads, so racing claims serialise.
   */
  claimSelect(query: CandidateQuery): string {
    const from = query.index === null ? "nodes" : `nodes INDEXED BY ${query.index}`;
    return `SELECT id FROM ${from} WHERE ${query.where} ORDER BY ${query.order} LIMIT 1`;
  }
  violation(error: unknown): { kind: "unique" | "foreign"; detail: string } | null {
    if (!(error instanceof Error && "code" in error)) return null;
    const code = String(error.code);
    if (code.startsWith("SQLITE_CONSTRAINT_UNIQUE")) return { kind: "unique", detail: error.message };
    return code === "SQLITE_CONSTRAINT_FOREIGNKEY" ? { kind: "foreign", detail: error.message } : null;
  }
  async close(): Promise<void> {
    while (this.busy || this.queued) await (this.busy ?? new Promise((resolve) => setImmediate(resolve)));
    this.db.close();
  }
}

/** The embedded store: one SQLite file (or ":memory:"), WAL mode, migrations on open. */
export class SqliteStore extends SqlStore<SqliteDialect> {
  constructor(path: string) {
    super(new SqliteDialect(path));
    // derived columns (matching, traits) are filled from the documents by writing every node again; the
    // transaction starts now, so every other statement waits for it
    if (this.d.migrated) void this.rewriteNodes();
  }

  /** How many prepared statements are cached now (bounded by STATEMENT_CACHE_SIZE); for tests. */
  get statementCacheSize(): number {
    return this.d.statements.size;
  }
}
