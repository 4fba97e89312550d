import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { BootDeviceBody, NodeCreateBody, PortCreateBody, ProvisionBody } from "../../shared/api.ts";
import { InvalidBoolean, parseStrictBool, requireStrictBool } from "../../shared/strict-bool.ts";
import { NodeListQuery, PortListQuery, parseQuery } from "../../conductor/api/query.ts";
import { toHttpError } from "../../conductor/api/errors.ts";
import { boolSpelling, expectedBool } from "../helpers/bool-spellings.ts";

describe("the strict boolean reader (oslo's bool_from_string, strict)", () => {
  it.each([
    ["no", false],
    [" FALSE ", false],
    ["Off", false],
    ["0", false],
    [0, false],
    ["y", true],
    ["\tOn\n", true],
    [1, true],
    [true, true],
  ] as const)("reads %j as %s", (value, want) => {
    expect(parseStrictBool(value)).toBe(want);
  });

  it.each(["maybe", "", "2", "1.0", null, {}, [], 2, "fals e"])("refuses %j", (value) => {
    expect(parseStrictBool(value)).toBeUndefined();
  });

  it("answers Ironic's text, a 400", () => {
    const error = (() => {
      try {
        requireStrictBool("automated_clean", "maybe");
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(InvalidBoolean);
    expect(toHttpError(error)).toEqual({
      status: 400,
      message:
        "Invalid automated_clean: Unrecognized value 'maybe', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'",
    });
  });

  it("agrees with an independent reading on generated spellings", () => {
    fc.assert(fc.property(boolSpelling, (value) => parseStrictBool(value) === expectedBool(value)));
  });

  const bodyFields: [string, z.ZodType, Record<string, unknown>][] = [
    ["automated_clean", NodeCreateBody, { driver: "fake-hardware" }],
    ["protected", NodeCreateBody, { driver: "fake-hardware" }],
    ["retired", NodeCreateBody, { driver: "fake-hardware" }],
    [
      "pxe_enabled",
      PortCreateBody,
      { address: "52:54:00:00:00:01", node_uuid: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123" },
    ],
    [
      "is_smartnic",
      PortCreateBody,
      { address: "52:54:00:00:00:01", node_uuid: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123" },
    ],
    ["disable_ramdisk", ProvisionBody, { target: "clean" }],
    ["persistent", BootDeviceBody, { boot_device: "pxe" }],
  ];
  it.each(bodyFields)("body field %s is read by the same reader", (key, schema, base) => {
    fc.assert(
      fc.property(boolSpelling, (value) => {
        const parsed = schema.safeParse({ ...base, [key]: value });
        const want = expectedBool(value);
        if (want === undefined) return !parsed.success;
        return parsed.success && (parsed.data as Record<string, unknown>)[key] === want;
      }),
    );
  });

  it.each([
    [NodeListQuery, "maintenance"],
    [NodeListQuery, "associated"],
    [NodeListQuery, "retired"],
    [NodeListQuery, "detail"],
    [PortListQuery, "detail"],
  ] as const)("query parameter %#: %s answers 400 for what it cannot read", (schema, key) => {
    fc.assert(
      fc.property(boolSpelling, (value) => {
        const text = String(value);
        const want = expectedBool(text);
        try {
          const parsed = parseQuery(schema, { [key]: text }) as Record<string, unknown>;
          return parsed[key] === want;
        } catch (error) {
          return (
            want === undefined &&
            toHttpError(error).status === 400 &&
            toHttpError(error).message.startsWith(`Invalid ${key}: Unrecognized value`)
          );
        }
      }),
    );
  });
});
