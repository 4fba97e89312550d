import { z } from "zod";

// oslo_utils.strutils TRUE_STRINGS / FALSE_STRINGS, which Ironic's API reads booleans with (strict=True)
const TRUE_STRINGS = ["1", "t", "true", "on", "y", "yes"] as const;
const FALSE_STRINGS = ["0", "f", "false", "off", "n", "no"] as const;
const TRUE_SET: ReadonlySet<string> = new Set(TRUE_STRINGS);
const FALSE_SET: ReadonlySet<string> = new Set(FALSE_STRINGS);
const ACCEPTABLE = [...TRUE_STRINGS, ...FALSE_STRINGS]
  .sort()
  .map((word) => `'${word}'`)
  .join(", ");
// an echoed value is cut: a megabyte string must not come back in the error
const ECHO_MAX = 64;

/** Why a value is not a boolean, in strutils' words (Ironic wraps it as `Invalid <field>: <this>`). */
export function unrecognizedBool(value: unknown): string {
  const text = typeof value === "string" ? value : String(JSON.stringify(value) ?? value);
  return `Unrecognized value '${text.slice(0, ECHO_MAX)}', acceptable values are: ${ACCEPTABLE}`;
}

/**
 * The API's one boolean reader, as `bool_from_string(subject, strict=True)`: a JSON boolean as is; a string
 * (or a number, read as its decimal text) stripped and lower-cased, then one of 1 t true on y yes / 0 f false
 * off n no. Anything else (null, objects, "maybe", "2") is `undefined`: the caller answers 400.
 */
export function parseStrictBool(value: unknown): boolean | undefined {
  if (typeof value === "boolean") return value;
  let text: string;
  if (typeof value === "string") text = value;
  else if (typeof value === "number" && Number.isFinite(value)) text = String(value);
  else return undefined;
  // NOTE: Python's str.strip() removes Unicode whitespace too; String.prototype.trim() matches it closely
  const word = text.trim().toLowerCase();
  if (TRUE_SET.has(word)) return true;
  if (FALSE_SET.has(word)) return false;
  return undefined;
}

/** A zod boolean that reads its input with {@link parseStrictBool}; its issue message is strutils' text. */
export const StrictBool = z.unknown().transform((value, ctx): boolean => {
  const parsed = parseStrictBool(value);
  if (parsed === undefined) {
    ctx.addIssue({ code: "custom", message: unrecognizedBool(value), params: { strictBool: true } });
    return z.NEVER;
  }
  return parsed;
});

/** A field or query parameter that is not a boolean: Ironic's InvalidParameterValue (400). */
export class InvalidBoolean extends Error {
  readonly statusCode = 400;
  constructor(name: string, value: unknown) {
    super(`Invalid ${name}: ${unrecognizedBool(value)}`);
    this.name = "InvalidBoolean";
  }
}

/** {@link parseStrictBool} for a named field. @throws InvalidBoolean */
export function requireStrictBool(name: string, value: unknown): boolean {
  const parsed = parseStrictBool(value);
  if (parsed === undefined) throw new InvalidBoolean(name, value);
  return parsed;
}
