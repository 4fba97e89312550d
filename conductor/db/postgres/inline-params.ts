import pg from "pg";
import type { SqlValue } from "../sql/dialect.ts";

/**
 * A statement with its `$n` placeholders replaced by the values as SQL literals, for what takes no
 * parameters (COPY); null when a value has no literal here: a list, a text with NUL (which would end the
 * statement's text), a number that is no finite integer. Strings are quoted by pg's escapeLiteral (quotes and
 * backslashes doubled, E'' when a backslash is in it), which reads back the same text whatever
 * standard_conforming_strings says.
 */
export function inlineParams(sql: string, values: readonly SqlValue[]): string | null {
  const literals: string[] = [];
  for (const value of values) {
    if (value === null) literals.push("NULL");
    else if (typeof value === "boolean") literals.push(value ? "TRUE" : "FALSE");
    else if (typeof value === "number") {
      if (!Number.isSafeInteger(value)) return null;
      // a negative one in parentheses: after a `-` its sign would open a comment
      literals.push(value < 0 ? `(${value})` : String(value));
    } else if (typeof value === "string") {
      if (value.includes("\0")) return null;
      literals.push(pg.escapeLiteral(value));
    } else return null;
  }
  let unknown = false;
  const text = sql.replace(/\$(\d+)/g, (_, n: string) => {
    const literal = literals[Number(n) - 1];
    if (literal === undefined) unknown = true;
    return literal ?? "";
  });
  return unknown ? null : text;
}
