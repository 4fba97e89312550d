import type { CandidateQuery } from "../candidates.ts";
import type { RawRows } from "./raw-rows.ts";

/** A statement parameter; arrays only where the dialect's `list` made them. */
export type SqlValue = string | number | boolean | null | readonly string[];

/** Runs one statement: rows as objects, or as arrays with `raw`. */
export interface Executor {
  all<R>(sql: string, params: readonly SqlValue[], options?: { raw?: boolean }): Promise<R[]>;
  /** @returns how many rows the statement changed */
  run(sql: string, params: readonly SqlValue[]): Promise<number>;
}

/**
 * What differs between SQLite and PostgreSQL; everything else is one SQL core (Ironic's db/sqlalchemy/api.py,
 * whose dialect comes from the engine). Parameters are numbered: a placeholder may come anywhere in the text.
 */
export interface Dialect extends Executor {
  /** The placeholder of the `index`-th parameter (from 1). */
  placeholder(index: number): string;
  /** SQL literals and a parameter for a boolean column. */
  readonly true: string;
  readonly false: string;
  bool(value: boolean): SqlValue;
  /** A stored JSON document as read (text in SQLite, already parsed in PostgreSQL). */
  doc<T>(value: unknown): T;
  /** A list parameter, and `column` belongs to it (an index lookup per value). */
  list(values: readonly string[]): SqlValue;
  inList(column: string, list: string): string;
  /** A table expression of the list parameter's values as column `value`. */
  rows(list: string): string;
  /** The text of a top-level key of a JSON document column. */
  jsonText(column: string, key: string): string;
  /** Whether text `expr` holds the text parameter `part`, ignoring case. */
  contains(expr: string, part: string): string;
  /** Whether a top-level key of a JSON document column is JSON `true` (a document that is no JSON: false). */
  jsonIsTrue(column: string, key: string): string;
  /** A path parameter inside a JSON document (keys from code, never from a request). */
  path(keys: readonly string[]): SqlValue;
  /** Whether JSON document column `column` holds the document whose text is parameter `text`. */
  sameDoc(column: string, text: string): string;
  /** `expr` with `path` set to the JSON text parameter `json`, or removed. */
  jsonSet(expr: string, path: string, json: string): string;
  jsonRemove(expr: string, path: string): string;
  /** ` INDEXED BY <index>` where the planner must be told (SQLite), else "". */
  indexedBy(index: string): string;
  /** The row lock a read-modify-write takes inside a transaction (" FOR UPDATE"), or "". */
  readonly forUpdate: string;
  /** A claim's SELECT of the chosen node's `id` (see CandidateQuery); null batch reads every trait row. */
  claimSelect(query: CandidateQuery, batch: number | null): string;
  /** Whether candidateQuery may walk the node_traits mirror (PostgreSQL's schema has it). */
  readonly traitRows: boolean;
  /** The default list page is joined into one text by the database (SQLite) rather than here. */
  readonly joinsPages: boolean;
  /** A node list's condition that hides child nodes (those with a parent_node), as API 1.83 lists do. */
  readonly noChildren: string;
  /**
   * A SELECT's rows as the database's bytes (no string per field), for the reads that copy most of their text
   * into an answer; null where this dialect or these parameters cannot: the caller reads by `all`. The caller
   * releases the rows once it is done with every view of them.
   */
  rawRows?(sql: string, params: readonly SqlValue[], columns: number): Promise<RawRows | null>;
  /** A constraint the error broke: its kind and the text naming it (message or constraint name). */
  violation(error: unknown): { kind: "unique" | "foreign"; detail: string } | null;
  /** Runs `work` in one transaction that takes the write lock first; rolls back when it throws. */
  transaction<T>(work: (db: Executor) => Promise<T>): Promise<T>;
  /**
   * Runs a write that needs no answer before it commits (a node's insert, a history row), possibly in one
   * transaction with the other writes queued in the same tick (group commit). Atomic on its own: a write that
   * throws is rolled back alone. Settles only after its commit.
   */
  grouped<T>(work: (db: Executor) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** Collects parameters while a statement is built. */
export class Params {
  readonly values: SqlValue[] = [];
  constructor(private readonly dialect: Pick<Dialect, "placeholder">) {}
  add(value: SqlValue): string {
    this.values.push(value);
    return this.dialect.placeholder(this.values.length);
  }
}
