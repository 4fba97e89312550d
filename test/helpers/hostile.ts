// Generators of hostile input for property tests at the API boundary.
import fc from "fast-check";

// secret-like keys: *password*, *token*, *secret*, *_key, in any case
const secretKey = fc
  .tuple(
    fc.constantFrom("", "ipmi_", "redfish_", "x", "Auth"),
    fc.constantFrom("password", "PASSWORD", "Password", "token", "Token", "secret", "SECRET", "_key", "_KEY"),
    fc.constantFrom("", "_value", "2"),
  )
  .map(([a, b, c]) => (b.startsWith("_") ? `${a || "ssh"}${b}` : `${a}${b}${c}`));
const plainKey = fc.constantFrom("redfish", "bmc", "address", "items", "nested", "port", "a", "b");

/** An object with `secret` under a secret-like key at a random depth, through objects and arrays. */
export const withSecret = (secret: string): fc.Arbitrary<Record<string, unknown>> =>
  fc
    .tuple(
      fc.array(fc.tuple(plainKey, fc.boolean()), { maxLength: 8 }),
      secretKey,
      fc.jsonValue({ maxDepth: 2 }),
    )
    .map(([path, key, noise]) => {
      let value: unknown = { [key]: secret, noise };
      for (const [name, inArray] of path.reverse())
        value = inArray ? { [name]: [noise, value] } : { [name]: value };
      return value as Record<string, unknown>;
    });

/** `{"k":{"k":...1...}}` nested `depth` levels, as text (too deep for JSON.stringify to build). */
export function deepJson(depth: number, open = '{"k":', close = "}"): string {
  return open.repeat(depth) + "1" + close.repeat(depth);
}

const KEYS = [
  "__proto__",
  "constructor",
  "prototype",
  "driver",
  "extra",
  "properties",
  "driver_info",
  "target",
  "op",
  "path",
  "value",
  "address",
  "node_uuid",
  "traits",
  "boot_device",
  "reason",
  "resource_class",
  "configdrive",
  "name",
];

/** Scalars as JSON text: wrong types, huge strings, values that look right. */
const scalarText = fc.oneof(
  { arbitrary: fc.jsonValue({ maxDepth: 0 }).map((v) => JSON.stringify(v)), weight: 6 },
  {
    arbitrary: fc.constantFrom(
      '"fake-hardware"',
      '"manage"',
      '"/extra/__proto__/x"',
      '"/extra/a"',
      '"pxe"',
      "null",
      "true",
    ),
    weight: 6,
  },
  // over the field limit, and over the body limit
  { arbitrary: fc.constantFrom(70_000, 1_100_000).map((n) => JSON.stringify("x".repeat(n))), weight: 1 },
);

/** JSON text of hostile shapes: prototype keys, deep nesting, huge strings, wrong types. */
export const hostileJson: fc.Arbitrary<string> = fc.letrec<{ value: string; object: string; array: string }>(
  (tie) => ({
    value: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      scalarText,
      tie("object"),
      tie("array"),
      fc.integer({ min: 20, max: 5000 }).map((depth) => deepJson(depth)),
      fc.integer({ min: 20, max: 5000 }).map((depth) => deepJson(depth, "[", "]")),
    ),
    object: fc
      .array(fc.tuple(fc.constantFrom(...KEYS), tie("value")), { maxLength: 4 })
      .map((entries) => `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(",")}}`),
    array: fc.array(tie("value"), { maxLength: 3 }).map((items) => `[${items.join(",")}]`),
  }),
).object;

/** Patch documents whose paths and values are hostile. */
export const hostilePatch: fc.Arbitrary<string> = fc
  .array(
    fc.tuple(
      fc.constantFrom("add", "replace", "remove", "test", "move"),
      fc
        .array(
          fc.constantFrom("extra", "__proto__", "constructor", "prototype", "a", "0", "-", "driver_info"),
          {
            minLength: 1,
            maxLength: 5,
          },
        )
        .map((s) => "/" + s.join("/")),
      fc.oneof(hostileJson, scalarText),
    ),
    { minLength: 1, maxLength: 3 },
  )
  .map(
    (ops) =>
      `[${ops.map(([op, path, value]) => `{"op":"${op}","path":${JSON.stringify(path)},"value":${value}}`).join(",")}]`,
  );
