import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { asciiComments } from "../../scripts/build/conductor.ts";

describe("the conductor bundle's text", () => {
  it("is ASCII, as long in UTF-16 units as before (the source map's columns hold), ASCII kept as is", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), (text) => {
        const out = asciiComments(text);
        expect([...out].every((char) => char.charCodeAt(0) < 0x80)).toBe(true);
        expect(out.length).toBe(text.length);
        for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) < 0x80) expect(out[i]).toBe(text[i]);
      }),
    );
    expect(asciiComments("// response’s type, RFC 9111 §5.2, 🔒\nx = '\\u2019';")).toBe(
      "// response?s type, RFC 9111 ?5.2, ??\nx = '\\u2019';",
    );
  });
});
