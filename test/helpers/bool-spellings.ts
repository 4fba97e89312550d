import fc from "fast-check";

/** The words oslo's strict reader knows, each as a test's own independent list. */
export const TRUE_WORDS = ["1", "t", "true", "on", "y", "yes"];
export const FALSE_WORDS = ["0", "f", "false", "off", "n", "no"];

const whitespace = fc.constantFrom("", " ", "  ", "\t", "\n", " \t ");
const recased = (word: string) =>
  fc
    .array(fc.boolean(), { minLength: word.length, maxLength: word.length })
    .map((upper) => [...word].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join(""));

/**
 * Values a client might send for a boolean: every known word in any case with padding, near misses,
 * arbitrary short strings, JSON booleans and small numbers.
 */
export const boolSpelling: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .tuple(whitespace, fc.constantFrom(...TRUE_WORDS, ...FALSE_WORDS), whitespace)
      .chain(([a, w, b]) => recased(w).map((r) => `${a}${r}${b}`)),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      "nope",
      "ture",
      "fals",
      "fa lse",
      "0.0",
      "1.0",
      "",
      " ",
      "none",
      "null",
      "2",
      "-1",
      "yess",
      "nO!",
      "\u00a0false\u00a0",
      "false\u0000",
    ),
  },
  { weight: 2, arbitrary: fc.string({ maxLength: 6 }) },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.integer({ min: -2, max: 3 }) },
);

/** A reference reading written apart from the product's parser: what Ironic would store, or undefined. */
export function expectedBool(value: unknown): boolean | undefined {
  if (value === true || value === false) return value;
  if (typeof value !== "string" && typeof value !== "number") return undefined;
  const word = String(value).trim().toLowerCase();
  if (TRUE_WORDS.includes(word)) return true;
  if (FALSE_WORDS.includes(word)) return false;
  return undefined;
}
