// Detail pages read their shown texts from PostgreSQL as bytes, by a binary COPY, which takes no parameters:
// the values go into its text as literals. These tests hold that path to pg's own parameterised reads.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { shownRowsOf } from "../helpers/shown-rows.ts";
import { PgStore } from "../../conductor/db/postgres/pg-store.ts";
import { inlineParams } from "../../conductor/db/postgres/inline-params.ts";
import type { SqlValue } from "../../conductor/db/sql/dialect.ts";
import { rawText } from "../../conductor/db/sql/raw-rows.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import { newNode } from "../../conductor/operations/node-record.ts";
import { startPostgres, type ThrowawayPostgres } from "../helpers/postgres.ts";

const fake = defaultDrivers(defaultConfig()).get("fake-hardware")!;

/** A PgStore that counts its reads of each kind. */
class CountingPgStore extends PgStore {
  readonly counts = { all: 0, raw: 0 };
  constructor(url: string) {
    super(url);
    const all = this.d.all.bind(this.d);
    this.d.all = <R>(sql: string, values: readonly SqlValue[], options?: { raw?: boolean }) => {
      this.counts.all++;
      return all<R>(sql, values, options);
    };
    const rawRows = this.d.rawRows.bind(this.d);
    this.d.rawRows = (sql: string, values: readonly SqlValue[], columns: number) => {
      this.counts.raw++;
      return rawRows(sql, values, columns);
    };
  }
  raw(sql: string, values: readonly SqlValue[], columns: number) {
    return this.d.rawRows(sql, values, columns);
  }
  rows(sql: string, values: readonly SqlValue[]) {
    return this.d.all<unknown[]>(sql, values, { raw: true });
  }
}

let server: ThrowawayPostgres;
let store: CountingPgStore;

beforeAll(async () => {
  server = await startPostgres();
  store = new CountingPgStore(await server.freshDatabase("rawrows"));
  await store.open();
}, 120_000);

afterAll(async () => {
  await store?.close();
  await server?.stop();
});

/** Text PostgreSQL keeps (no NUL), quotes, backslashes, placeholders and non-ASCII most of all. */
const text = fc.oneof(
  fc.string({ unit: fc.constantFrom("'", "\\", "$", "1", "E", "\n", "é", "😀", "a", " ", ";", "-", '"') }),
  fc.string({ unit: "grapheme" }),
  fc.string({ unit: "binary" }).filter((s) => !s.includes("\0")),
);
const value = fc.oneof(
  text,
  fc.maxSafeInteger(),
  fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
  fc.boolean(),
  fc.constant(null),
);

describe("a read as bytes (binary COPY with its values as literals)", () => {
  it("property: returns the rows pg's parameterised read returns, for any values", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(value, { minLength: 1, maxLength: 12 }), async (values) => {
        // each value cast as pg's own read would take it; `-$n` tries a literal right after a minus
        const list = values
          .map((v, i) =>
            typeof v === "number"
              ? `0-$${i + 1}::bigint`
              : typeof v === "boolean"
                ? `$${i + 1}::boolean`
                : `$${i + 1}::text`,
          )
          .join(", ");
        const sql = `SELECT ${list}`;
        const expected = await store.rows(sql, values);
        const raw = await store.raw(sql, values, values.length);
        expect(raw).not.toBeNull();
        expect(raw!.rows).toBe(1);
        const read = values.map((_, c) => rawText(raw!, 0, c));
        // binary COPY sends a bigint as 8 bytes and a boolean as 1: compare those by value
        const asText = read.map((field, c) => {
          const v = values[c];
          if (field === null) return null;
          if (typeof v === "number") return String(raw!.data.readBigInt64BE(raw!.bounds[c * 2]!));
          if (typeof v === "boolean") return raw!.data[raw!.bounds[c * 2]!] === 1 ? "true" : "false";
          return field;
        });
        expect(asText).toEqual(
          expected[0]!.map((field) =>
            field === null ? null : typeof field === "boolean" ? String(field) : String(field),
          ),
        );
      }),
      { numRuns: 150 },
    );
  });

  it("a read of many socket reads (4 MB) returns pg's rows, every byte", async () => {
    // each row differs: a payload kept as a view into a reused read buffer would show another row's bytes
    const sql = `SELECT i, repeat(md5(i::text), $1::int) || 'é' FROM generate_series(1, $2::int) AS i`;
    const values = [40, 3000];
    const expected = await store.rows(sql, values);
    const raw = await store.raw(sql, values, 2);
    expect(raw!.rows).toBe(3000);
    expect(raw!.data.length).toBeGreaterThan(3_000_000);
    for (let r = 0; r < raw!.rows; r++) expect(rawText(raw!, r, 1)).toBe(expected[r]![1]);
  });

  it("pages read side by side each see their own rows; a page's bytes are used again once its `use` returns", async () => {
    const groups = ["page-a", "page-b", "page-c"];
    // 200 nodes a group: a page of ~300 KB, above what the buffer pool keeps (256 KiB)
    for (const group of groups)
      for (let i = 0; i < 200; i++)
        await store.createNode({ ...newNode({ driver: "fake-hardware" }, fake), conductor_group: group });
    const own = (group: string) =>
      store.listNodeShown({ conductor_group: group }, {}, (rows) =>
        rows!.every(
          (row) => row.conductor_group === group && String(row.shown).startsWith(`{"uuid":"${row.uuid}"`),
        )
          ? rows!.length
          : -1,
      );
    expect(await Promise.all([...groups, ...groups, ...groups].map(own))).toEqual(Array(9).fill(200));
    // a view kept past `use` (what the contract forbids) shows another page's bytes after the next read
    let kept: Buffer | undefined;
    let text = "";
    await store.listNodeShown({ conductor_group: "page-a" }, {}, (rows) => {
      kept = rows![0]!.shown as Buffer;
      text = kept.toString("utf8");
    });
    await store.listNodeShown({ conductor_group: "page-b" }, {}, () => undefined);
    expect(kept!.toString("utf8")).not.toBe(text);
  }, 60_000);

  it("gives way (null) where a value has no literal: a NUL in text, a list, an unsafe number", async () => {
    expect(await store.raw("SELECT $1::text", ["a\0b"], 1)).toBeNull();
    expect(await store.raw("SELECT $1::text[]", [["a"]], 1)).toBeNull();
    expect(await store.raw("SELECT $1::float8", [0.5], 1)).toBeNull();
    expect(inlineParams("SELECT $1, $2", ["a"])).toBeNull();
    expect(inlineParams("SELECT $10, $1", [...Array.from({ length: 9 }, (_, i) => i), 10])).toBe(
      "SELECT 10, 0",
    );
  });

  it("a statement that fails reports PostgreSQL's error, and the pool goes on", async () => {
    await expect(store.raw("SELECT 1/0", [], 1)).rejects.toThrow("division by zero");
    const raw = await store.raw("SELECT $1::text", ["still here"], 1);
    expect(rawText(raw!, 0, 0)).toBe("still here");
  });

  it("a detail page's shown texts are read as bytes, with a filter's text as a literal", async () => {
    const group = "it's \\ é";
    for (let i = 0; i < 3; i++)
      await store.createNode({
        ...newNode({ driver: "fake-hardware", name: `n-${i}-é` }, fake),
        conductor_group: group,
      });
    store.counts.all = 0;
    store.counts.raw = 0;
    const rows = await shownRowsOf(store, { conductor_group: group });
    expect(store.counts).toEqual({ all: 0, raw: 1 });
    expect(rows).toHaveLength(3);
    for (const row of rows!) {
      expect(Buffer.isBuffer(row.shown)).toBe(true);
      expect(row.conductor_group).toBe(group);
      const shown = (row.shown as Buffer).toString("utf8");
      expect(shown).toContain(`"uuid":"${row.uuid}"`);
      expect(shown).toMatch(/"name":"n-\d-é"/);
    }
    // a filter whose text has no literal takes pg's read, and gets its answer: PostgreSQL refuses NUL in text
    await expect(shownRowsOf(store, { conductor_group: "a\0" })).rejects.toThrow(/0x00/);
    expect(store.counts).toEqual({ all: 1, raw: 2 });
  });
});
