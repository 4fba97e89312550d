import fc from "fast-check";
import { execFileSync } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { ApiError } from "../../conductor/api/errors.ts";
import { applyJsonPatch, type PatchRules } from "../../conductor/api/json-patch.ts";
import { pythonRepr } from "../../shared/py-format.ts";
import type { JsonPatch } from "../../shared/api.ts";

const RULES: PatchRules = {
  writable: new Set(["name", "extra", "driver_info"]),
  objectFields: new Set(["extra", "driver_info"]),
};
const PROTO_NAMES = Object.getOwnPropertyNames(Object.prototype).sort();

function doc(): Record<string, unknown> {
  return { uuid: "u", name: "n", extra: { a: { b: [1, 2] } }, driver_info: {}, provision_state: "enroll" };
}

function refusal(patch: JsonPatch, source = doc()): string {
  try {
    applyJsonPatch(source, patch, RULES);
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBe(400);
    return (error as ApiError).message;
  }
  throw new Error(`patch was accepted: ${JSON.stringify(patch)}`);
}

afterEach(() => {
  expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(PROTO_NAMES);
});

describe("JSON Patch with Ironic's rules", () => {
  it("applies add, replace and remove below object fields, leaving the source untouched", () => {
    const source = doc();
    const { doc: out, touched } = applyJsonPatch(
      source,
      [
        { op: "add", path: "/extra/a/c", value: 3 },
        { op: "replace", path: "/extra/a/b/0", value: 9 },
        { op: "add", path: "/extra/a/b/-", value: 4 },
        { op: "remove", path: "/extra/a/b/1" },
        { op: "replace", path: "/name", value: "m" },
      ],
      RULES,
    );
    expect(out.extra).toEqual({ a: { b: [9, 4], c: 3 } });
    expect(out.name).toBe("m");
    expect([...touched].sort()).toEqual(["extra", "name"]);
    expect(source).toEqual(doc());
  });

  it("never creates parents implicitly (RFC 6902 §4.1)", () => {
    expect(refusal([{ op: "add", path: "/extra/missing/b", value: 1 }])).toMatch(
      /member 'missing' not found/,
    );
    expect(refusal([{ op: "add", path: "/extra/a/b/7", value: 1 }])).toMatch(/Couldn't apply patch/);
  });

  it("refuses internal attributes, sub-keys of non-object fields, and missing targets", () => {
    expect(refusal([{ op: "replace", path: "/provision_state", value: "active" }])).toMatch(
      /internal attribute/,
    );
    expect(refusal([{ op: "replace", path: "/uuid", value: "x" }])).toMatch(/internal attribute/);
    expect(refusal([{ op: "add", path: "/name/x", value: 1 }])).toMatch(/not an object/);
    expect(refusal([{ op: "remove", path: "/extra/nothing" }])).toMatch(/non-existent/);
    expect(refusal([{ op: "replace", path: "/extra/nothing", value: 1 }])).toMatch(/non-existent/);
  });

  it("removes a top-level field holding null, as Ironic's patch of the full dict does; refuses an absent one", () => {
    const source = { ...doc(), name: null };
    const { doc: out, touched } = applyJsonPatch(source, [{ op: "remove", path: "/name" }], RULES);
    expect(out.name).toBeNull();
    expect(touched).toEqual(new Set(["name"]));
    const { name: _absent, ...without } = doc();
    expect(refusal([{ op: "remove", path: "/name" }], without)).toBe(
      "Can't remove non-existent object 'name'",
    );
  });

  it("removing a writable top-level field leaves null whatever it held (property)", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...RULES.writable),
        fc.option(fc.jsonValue({ maxDepth: 2 })),
        (field, held) => {
          const { doc: out, touched } = applyJsonPatch(
            { ...doc(), [field]: held },
            [{ op: "remove", path: `/${field}` }],
            RULES,
          );
          expect(out[field]).toBeNull();
          expect(touched.has(field)).toBe(true);
        },
      ),
    );
  });

  it("is all or nothing: a failing operation leaves no earlier one applied", () => {
    const source = doc();
    refusal(
      [
        { op: "add", path: "/extra/new", value: 1 },
        { op: "remove", path: "/extra/absent" },
      ],
      source,
    );
    expect(source).toEqual(doc());
  });

  it("refuses __proto__, constructor and prototype as a segment at any depth (property)", () => {
    const hostile = fc.constantFrom("__proto__", "constructor", "prototype");
    const plain = fc.constantFrom(
      "extra",
      "driver_info",
      "name",
      "a",
      "b",
      "0",
      "-",
      "~0x",
      "x~1y",
      "toString",
    );
    let tried = 0;
    fc.assert(
      fc.property(
        fc.record({
          segments: fc.array(plain, { maxLength: 6 }),
          bad: hostile,
          at: fc.nat(),
          op: fc.constantFrom("add", "replace", "remove"),
          value: fc.jsonValue(),
        }),
        ({ segments, bad, at, op, value }) => {
          const path: string[] = [...segments];
          path.splice(at % (path.length + 1), 0, bad);
          const operation = { op, path: "/" + path.join("/"), value } as JsonPatch[number];
          tried++;
          refusal([operation]);
          expect(({} as Record<string, unknown>).polluted).toBeUndefined();
        },
      ),
      { numRuns: 2000, seed: 11 },
    );
    console.log(`json-patch: ${tried} hostile paths tried, all refused with 400`);
  });

  it("never throws anything but a 400 and never pollutes for arbitrary paths (property)", () => {
    let tried = 0;
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom("__proto__", "extra", "a", "b", "0")),
          {
            minLength: 1,
            maxLength: 5,
          },
        ),
        fc.constantFrom("add", "replace", "remove"),
        fc.jsonValue({ maxDepth: 3 }),
        (segments, op, value) => {
          tried++;
          try {
            applyJsonPatch(
              doc(),
              [{ op, path: "/" + segments.join("/"), value } as JsonPatch[number]],
              RULES,
            );
          } catch (error) {
            expect(error).toBeInstanceOf(ApiError);
            expect((error as ApiError).status).toBe(400);
          }
          expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(PROTO_NAMES);
        },
      ),
      { numRuns: 2000, seed: 12 },
    );
    console.log(`json-patch: ${tried} arbitrary paths tried`);
  });
});

describe("the failed operation in a refusal, quoted as Ironic's PatchError does", () => {
  it("is a Python dict's repr, so a client's repr() of the text keeps `can't` as written", () => {
    const text = refusal([{ op: "remove", path: "/extra/missing" }]);
    expect(text).toBe(
      "Couldn't apply patch '{'op': 'remove', 'path': '/extra/missing'}'. Reason: can't remove a non-existent object 'missing'.",
    );
    // python-ironicclient matches "Reason: can't remove a non-existent object" in repr(stderr bytes)
    const asPythonRepr = pythonRepr(text);
    expect(asPythonRepr).toContain("Reason: can't remove a non-existent object");
  });

  it("writes any string as Python 3's repr() does (generated, checked against python3)", () => {
    const strings = fc.sample(
      fc.string({
        unit: fc.constantFrom("a", "/", "'", '"', "\\", "\n", "\t", "\r", "\x00", "\x1f", "\x7f", "~", " "),
      }),
      300,
    );
    const python = "import json,sys\nprint(json.dumps([repr(s) for s in json.load(sys.stdin)]))";
    const expected = JSON.parse(
      execFileSync("python3", ["-c", python], { input: JSON.stringify(strings), encoding: "utf8" }),
    ) as string[];
    expect(strings.map(pythonRepr)).toEqual(expected);
  });
});
