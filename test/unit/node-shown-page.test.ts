import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { inJsonString } from "../../conductor/api/node-shown-page.ts";

describe("a text as written inside a JSON string (inJsonString)", () => {
  it("property: is what JSON.stringify writes between the quotes, for any text", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "binary" }), fc.string(), fc.uuid()), (text) => {
        expect(inJsonString(text)).toBe(JSON.stringify(text).slice(1, -1));
      }),
      { numRuns: 2000 },
    );
  });

  it("leaves a uuid as it is", () => {
    const uuid = "3c2b1a09-8f7e-4d6c-9b5a-000000000a64";
    expect(inJsonString(uuid)).toBe(uuid);
    expect(inJsonString('a"b\\\u0001\u007f\ud800')).toBe('a\\"b\\\\\\u0001\u007f\\ud800');
  });
});
