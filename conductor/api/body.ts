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
  try {
    checkJsonDepth(value, { maxDepth: options.maxDepth, what: "The request body" });
  } catch (error) {
    if (error instanceof JsonLimitError) throw new ApiError(400, error.message);
    throw error;
  }
  return value;
}
