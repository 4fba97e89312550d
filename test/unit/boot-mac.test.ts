import { describe, expect, it } from "vitest";
import { InvalidDriverInfo } from "../../conductor/drivers/errors.ts";
import { isMac, macHyphenated, macPxeName, normalizeMac } from "../../conductor/drivers/boot/mac.ts";

describe("MAC addresses", () => {
  it.each([
    ["52:54:00:AB:cd:EF", "52:54:00:ab:cd:ef"],
    ["52-54-00-ab-cd-ef", "52:54:00:ab:cd:ef"],
    ["00:00:00:00:00:00", "00:00:00:00:00:00"],
  ])("normalises %s", (input, expected) => {
    expect(normalizeMac(input)).toBe(expected);
  });

  it.each([
    "",
    "52:54:00:ab:cd",
    "52:54:00:ab:cd:ef:01",
    "52:54-00:ab:cd:ef",
    "5254.00ab.cdef",
    "525400abcdef",
    " 52:54:00:ab:cd:ef",
    "52:54:00:ab:cd:ef\n",
    "52:54:00:ab:cd:eg",
    "../../etc/passwd",
    "52:54:00:ab:cd:ef/../../x",
    "2:54:00:ab:cd:ef",
  ])("rejects %j", (input) => {
    expect(isMac(input)).toBe(false);
    expect(() => normalizeMac(input)).toThrow(InvalidDriverInfo);
  });

  it("rejects non-strings", () => {
    expect(() => normalizeMac(42)).toThrow(/invalid MAC address/);
  });

  it("spells the file-name forms", () => {
    const mac = normalizeMac("52:54:00:AB:CD:EF");
    expect(macHyphenated(mac)).toBe("52-54-00-ab-cd-ef");
    expect(macPxeName(mac)).toBe("01-52-54-00-ab-cd-ef");
  });
});
