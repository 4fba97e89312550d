import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { REDACTABLE_NODE_FIELDS, SHOWN_FORM, storedCuts } from "../../conductor/db/node-shown.ts";

const SLOTS = REDACTABLE_NODE_FIELDS.length * 2;

/** What a stored cuts column means: exactly SLOTS decimal numbers after this form's prefix, else nothing. */
function reference(cuts: string): number[] | null {
  if (!cuts.startsWith(`${SHOWN_FORM}/`)) return null;
  const numbers = cuts.slice(SHOWN_FORM.length + 1).split(",");
  if (numbers.length !== SLOTS || !numbers.every((n) => /^[0-9]+$/.test(n))) return null;
  const parsed = numbers.map(Number);
  return parsed.every((n) => n <= 2 ** 40) ? parsed : null;
}

describe("a node's stored cuts (node_shown.shown_cuts)", () => {
  it("property: reads back what was written", () => {
    fc.assert(
      fc.property(
        fc.array(fc.nat({ max: 10_000_000 }), { minLength: SLOTS, maxLength: SLOTS }),
        (numbers) => {
          expect(storedCuts("{", `${SHOWN_FORM}/${numbers.join(",")}`)).toEqual(numbers);
        },
      ),
    );
  });

  it("property: any other text (another form, too few or many numbers, signs, spaces) is no cuts", () => {
    const piece = fc.oneof(
      fc.nat({ max: 99_999 }).map(String),
      fc.constantFrom("", " 1", "1 ", "-1", "+1", "1e3", "0x1", "1.5", "١", "9".repeat(16)),
    );
    const tail = fc.array(piece, { minLength: 0, maxLength: SLOTS + 2 }).map((parts) => parts.join(","));
    const prefix = fc.constantFrom(`${SHOWN_FORM}/`, SHOWN_FORM, "0:older/", `${SHOWN_FORM}x/`, "");
    fc.assert(
      fc.property(prefix, fc.oneof(tail, fc.string()), (head, rest) => {
        const cuts = head + rest;
        expect(storedCuts("{", cuts)).toEqual(reference(cuts));
      }),
      { numRuns: 2000 },
    );
  });

  it("a row without a text has no cuts", () => {
    const cuts = `${SHOWN_FORM}/${Array.from({ length: SLOTS }, (_, i) => i).join(",")}`;
    expect(storedCuts(null, cuts)).toBeNull();
    expect(storedCuts("{", null)).toBeNull();
  });
});
