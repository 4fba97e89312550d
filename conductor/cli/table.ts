/** Boxed tables like the stock OpenStack CLI prints (cliff's "table" formatter). */

/** How one value reads in a cell: None for null, True/False, JSON for objects. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  return JSON.stringify(value);
}

/** Aligned columns inside +---+ borders; one line per row (newlines in values become spaces). */
export function renderTable(headers: readonly string[], rows: readonly (readonly unknown[])[]): string {
  const cells = rows.map((row) => headers.map((_, i) => cellText(row[i]).replace(/\r?\n/g, " ")));
  const widths = headers.map((header, i) => Math.max(header.length, ...cells.map((row) => row[i]!.length)));
  const border = `+${widths.map((w) => "-".repeat(w + 2)).join("+")}+`;
  const line = (values: readonly string[]): string =>
    `| ${values.map((value, i) => value.padEnd(widths[i]!)).join(" | ")} |`;
  const out = [border, line(headers), border];
  if (cells.length) out.push(...cells.map(line), border);
  return out.join("\n");
}

/** [{href, rel}, ...]: navigation links, noise in a table. */
function isLinkList(value: unknown): boolean {
  return (
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((item) => typeof item === "object" && item !== null && "href" in item && "rel" in item)
  );
}

/** A record as a two-column Field | Value table, fields sorted, link lists left out. */
export function renderRecord(record: Record<string, unknown>): string {
  const keys = Object.keys(record)
    .filter((key) => !isLinkList(record[key]))
    .sort();
  return renderTable(
    ["Field", "Value"],
    keys.map((key) => [key, record[key]]),
  );
}
