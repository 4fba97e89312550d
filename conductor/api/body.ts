import secureJsonParse from "secure-json-parse";
import { JsonLimitError, checkJsonDepth } from "../../shared/json-shape.ts";
import { ApiError } from "./errors.ts";

/**
 * Parses a JSON request body (empty means no body: clients send Content-Type on bodiless PUT/DELETE).
 * `__proto__` keys and `constructor.prototype` are refused by secure-json-parse, so no body can reach
 * Object.prototype; nesting deeper than maxDepth is refused before any handler walks the value.
 * @throws ApiError(400)
 */
export function parseJsonBody(text: string, options: { maxDepth: number }): unknown {
  if (text === "") return undefined;
  let value: unknown;
  try {
    value = secureJsonParse.parse(text, null, {
      protoAction: "error",
      constructorAction: "error",
    }) as unknown;
  } catch (error) {
    throw new ApiError(400, `Malformed JSON in the request body: ${(error as Error).message}`);
  }
  // Only an escape can carry these in (decoded UTF-8 has no lone surrogates, raw NULs are invalid JSON):
  // walk the value only when the text has one.
  if (UNSTORABLE_ESCAPE.test(text)) {
    // the text itself is not echoed: it may be a secret
    if (hasUnstorableString(value))
      throw new ApiError(400, `Malformed JSON in the request body: ${UNSTORABLE_WHY}`);
  }
  try {
    checkJsonDepth(value, { maxDepth: options.maxDepth, what: "The request body" });
  } catch (error) {
    if (error instanceof JsonLimitError) throw new ApiError(400, error.message);
    throw error;
  }
  return value;
}

const UNSTORABLE_ESCAPE = /\\u(?:0000|[dD][89a-fA-F])/;
/** A NUL, or half of a UTF-16 surrogate pair: text PostgreSQL refuses to store and SQLite would store garbled. */
// eslint-disable-next-line no-control-regex
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UNSTORABLE_WHY =
  "a key or string holds a NUL character (\\u0000) or a lone UTF-16 surrogate, which cannot be stored";

/** Whether any key or string of a parsed body holds what UNSTORABLE matches. */
function hasUnstorableString(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === "string") {
      if (UNSTORABLE.test(item)) return true;
    } else if (Array.isArray(item)) {
      for (const child of item) stack.push(child);
    } else if (typeof item === "object" && item !== null) {
      for (const [key, child] of Object.entries(item)) {
        if (UNSTORABLE.test(key)) return true;
        stack.push(child);
      }
    }
  }
  return false;
}
