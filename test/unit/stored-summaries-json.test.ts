import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { storedSummariesJson } from "../../conductor/db/summary-json.ts";

/** A row as PostgreSQL keeps it: the uuid, and the node's object JSON-encoded without its closing brace. */
function row(uuid: string, name: string | null): [string, string] {
  return [uuid, JSON.stringify({ uuid, maintenance: false, name }).slice(0, -1)];
}

function expected(rows: readonly [string, string][], linkBase: string): unknown[] {
  return rows.map(([uuid, object]) => ({
    ...(JSON.parse(`${object}}`) as object),
    links: [
      { href: `${linkBase}/v1/nodes/${uuid}`, rel: "self" },
      { href: `${linkBase}/nodes/${uuid}`, rel: "bookmark" },
    ],
  }));
}

describe("a PostgreSQL list page's JSON from its stored objects", () => {
  it("closes every object with its links, for any uuid, name and link base", () => {
    let odd = 0;
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.oneof(
              // what the API accepts, and what it never would (quotes, backslashes, control and non-ASCII
              // characters, other lengths): the page must stay JSON that means the same
              fc.uuid(),
              fc
                .array(fc.constantFrom(..."0123456789abcdef-", '"', "\\", "\n", "\u0001", "é", "\u2028"), {
                  minLength: 36,
                  maxLength: 36,
                })
                .map((chars) => chars.join("")),
              fc.string({ unit: "binary", maxLength: 40 }),
            ),
            fc.option(fc.string({ unit: "binary", maxLength: 12 }), { nil: null }),
          ),
          { maxLength: 8 },
        ),
        fc.constantFrom("http://127.0.0.1:6385", 'http://h:1/"x\\', "https://bäremetal.example:443"),
        (specs, linkBase) => {
          const rows = specs.map(([uuid, name]) => row(uuid, name));
          odd += rows.filter(([uuid]) => !/^[0-9a-f-]{36}$/.test(uuid)).length;
          const page = storedSummariesJson(rows, linkBase);
          expect(JSON.parse(page.toString("utf8"))).toEqual(expected(rows, linkBase));
        },
      ),
      { numRuns: 300 },
    );
    expect(odd).toBeGreaterThan(100);
  });

  it("fills its buffer exactly on a full page, non-ASCII names among them", () => {
    const rows = Array.from({ length: 1000 }, (_, i) =>
      row(randomUUID(), i % 7 === 0 ? `nœud-${i}` : `n-${i}`),
    );
    const page = storedSummariesJson(rows, "http://127.0.0.1:6385");
    expect(page.at(-1)).toBe(0x5d);
    expect(JSON.parse(page.toString("utf8"))).toEqual(expected(rows, "http://127.0.0.1:6385"));
    expect(storedSummariesJson([], "http://x").toString()).toBe("[]");
  });
});
