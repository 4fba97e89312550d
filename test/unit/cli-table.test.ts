import { describe, expect, it } from "vitest";
import { cellText, renderRecord, renderTable } from "../../conductor/cli/table.ts";

describe("tables", () => {
  it("aligns columns inside borders", () => {
    expect(
      renderTable(
        ["UUID", "Name"],
        [
          ["u-1", "node-long-name"],
          ["u-22", null],
        ],
      ),
    ).toBe(
      [
        "+------+----------------+",
        "| UUID | Name           |",
        "+------+----------------+",
        "| u-1  | node-long-name |",
        "| u-22 | None           |",
        "+------+----------------+",
      ].join("\n"),
    );
  });

  it("prints values as the stock CLI does", () => {
    expect(cellText(true)).toBe("True");
    expect(cellText(undefined)).toBe("None");
    expect(cellText({ a: 1 })).toBe('{"a":1}');
  });

  it("shows a record sorted by field, without link lists", () => {
    const out = renderRecord({
      uuid: "u",
      name: "n",
      ports: [{ href: "http://x", rel: "self" }],
      traits: [],
    });
    expect(out.split("\n").slice(3, -1)).toEqual([
      "| name   | n     |",
      "| traits | []    |",
      "| uuid   | u     |",
    ]);
  });
});
