/**
 * Bounds on JSON that crosses a trust boundary: nesting depth and serialised size. Walks iteratively, so a
 * hostile document nested a million levels deep cannot overflow the stack while it is being measured.
 */

/** Keys that reach an object's prototype when assigned: never a stored key or a JSON Patch path segment. */
export const PROTOTYPE_KEYS: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype"]);

export type JsonLimitKind = "depth" | "size" | "key";

/** A JSON value is nested too deeply, too large, or carries a prototype key. */
export class JsonLimitError extends Error {
  constructor(
    readonly kind: JsonLimitKind,
    message: string,
  ) {
    super(message);
    this.name = "JsonLimitError";
  }
}

/** True for plain JSON objects and arrays (what JSON.parse builds), false for everything else. */
function isContainer(value: unknown): value is Record<string, unknown> | unknown[] {
  return typeof value === "object" && value !== null;
}

/**
 * The nesting depth of `value` (a scalar is 0, `{}` is 1), counting no further than `stopAt + 1`:
 * enough to tell "too deep" without walking a hostile document to its end.
 */
export function jsonDepth(value: unknown, stopAt = Number.MAX_SAFE_INTEGER): number {
  if (!isContainer(value)) return 0;
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop() as [unknown, number];
    if (depth > deepest) deepest = depth;
    if (deepest > stopAt) return deepest;
    const children = Array.isArray(current) ? current : Object.values(current as Record<string, unknown>);
    for (const child of children) if (isContainer(child)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/** The first own key anywhere in `value` that could reach a prototype, or null. */
export function prototypeKeyIn(value: unknown, maxDepth: number): string | null {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop() as [unknown, number];
    if (!isContainer(current) || depth > maxDepth) continue;
    if (!Array.isArray(current)) {
      for (const key of Object.keys(current)) if (key === "__proto__") return key;
    }
    const children = Array.isArray(current) ? current : Object.values(current);
    for (const child of children) if (isContainer(child)) stack.push([child, depth + 1]);
  }
  return null;
}

/** @throws JsonLimitError("depth") when `value` nests deeper than maxDepth; ("key") on a __proto__ key. */
export function checkJsonDepth(value: unknown, options: { maxDepth: number; what: string }): void {
  const depth = jsonDepth(value, options.maxDepth);
  if (depth > options.maxDepth) {
    throw new JsonLimitError(
      "depth",
      `${options.what} is nested more than ${options.maxDepth} levels deep, which is not allowed.`,
    );
  }
  const key = prototypeKeyIn(value, options.maxDepth);
  if (key !== null) throw new JsonLimitError("key", `${options.what} may not contain the key "${key}".`);
}

/** Serialised size in bytes (UTF-8), or Infinity when the value cannot be serialised at all. */
export function jsonBytes(value: unknown): number {
  try {
    return Buffer.byteLength(JSON.stringify(value) ?? "");
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/**
 * Checks free-form fields of a record against depth and size bounds.
 * @throws JsonLimitError naming the first field over a bound.
 */
export function checkJsonFields(
  record: Record<string, unknown>,
  options: { fields: readonly string[]; maxDepth: number; maxBytes: number },
): void {
  for (const field of options.fields) {
    const value = record[field];
    if (value === undefined || value === null) continue;
    checkJsonDepth(value, { maxDepth: options.maxDepth, what: `Field ${field}` });
    const bytes = jsonBytes(value);
    if (bytes > options.maxBytes) {
      throw new JsonLimitError(
        "size",
        `Field ${field} is ${bytes} bytes once serialised; the limit is ${options.maxBytes} bytes.`,
      );
    }
  }
}
