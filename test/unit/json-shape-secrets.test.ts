import fc from "fast-check";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { JsonLimitError, checkJsonDepth, checkJsonFields, jsonDepth } from "../../shared/json-shape.ts";
import { createLogger } from "../../shared/log.ts";
import { MASK, maskSecrets, restoreMaskedSecrets } from "../../shared/secrets.ts";
import { childEnvironment, exec } from "../../shared/system/exec.ts";
import { withSecret } from "../helpers/hostile.ts";

function nested(depth: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = i % 2 ? [value] : { k: value };
  return value;
}

describe("JSON depth and size bounds", () => {
  it("measures depth without recursion, even a million levels deep", () => {
    expect(jsonDepth(1)).toBe(0);
    expect(jsonDepth({})).toBe(1);
    expect(jsonDepth(nested(40))).toBe(40);
    const deep = JSON.parse("[".repeat(1_000_000) + "]".repeat(1_000_000)) as unknown;
    expect(jsonDepth(deep, 32)).toBe(33);
    expect(() => checkJsonDepth(deep, { maxDepth: 32, what: "body" })).toThrow(JsonLimitError);
  });

  it("names the field over a bound", () => {
    const limits = { fields: ["extra"], maxDepth: 4, maxBytes: 100 };
    expect(() => checkJsonFields({ extra: nested(5) }, limits)).toThrow(/extra is nested more than 4/);
    expect(() => checkJsonFields({ extra: { a: "x".repeat(200) } }, limits)).toThrow(/extra is \d+ bytes/);
    expect(() => checkJsonFields({ extra: nested(4), other: nested(50) }, limits)).not.toThrow();
  });
});

describe("secret masking at any depth", () => {
  it("never lets a secret through, inside objects and arrays (property)", () => {
    let tried = 0;
    fc.assert(
      fc.property(withSecret("s3cr3t-value-9f2"), (doc) => {
        tried++;
        const masked = maskSecrets(doc);
        expect(JSON.stringify(masked)).not.toContain("s3cr3t-value-9f2");
        expect(JSON.stringify(doc)).toContain("s3cr3t-value-9f2"); // the original is not touched
      }),
      { numRuns: 1000, seed: 9 },
    );
    console.log(`masking: ${tried} nested documents tried`);
  });

  it("keeps nulls, keeps a __proto__ key an own key, and restores echoed masks", () => {
    const masked = maskSecrets({ password: null, a: [{ token: "t" }] });
    expect(masked).toEqual({ password: null, a: [{ token: MASK }] });
    const hostile = JSON.parse('{"__proto__": {"password": "p"}}') as Record<string, unknown>;
    const out = maskSecrets(hostile);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(JSON.stringify(out)).toBe('{"__proto__":{"password":"******"}}');
    const next = { redfish: { password: MASK, user: "u" } };
    restoreMaskedSecrets(next, { redfish: { password: "real", user: "old" } });
    expect(next).toEqual({ redfish: { password: "real", user: "u" } });
  });

  it("masks nested secrets in log lines", () => {
    const lines: string[] = [];
    const logger = createLogger({
      destination: new Writable({
        write(chunk: Buffer, _encoding, done) {
          lines.push(chunk.toString());
          done();
        },
      }),
    });
    logger.info({ node: { driver_info: { redfish: { password: "log-secret-1" } } } }, "shown");
    logger.error({ err: new Error("boom"), deep: [{ auth_token: "log-secret-2" }] }, "failed");
    expect(lines.join("")).not.toMatch(/log-secret/);
    expect(lines.join("")).toContain("boom");
  });
});

describe("child environments", () => {
  it("carry nothing inherited, even with Object.prototype polluted", async () => {
    const proto = Object.prototype as Record<string, unknown>;
    proto.POLLUTED_FOR_TEST = "yes";
    try {
      const env = childEnvironment({ IPMI_PASSWORD: "pw" });
      expect(Object.getPrototypeOf(env)).toBeNull();
      const result = await exec("env", [], { env: { IPMI_PASSWORD: "pw" } });
      expect(result.stdout).toContain("IPMI_PASSWORD=pw");
      expect(result.stdout).not.toContain("POLLUTED_FOR_TEST");
    } finally {
      delete proto.POLLUTED_FOR_TEST;
    }
  });

  it("carry where the machine's CAs are, so a child that downloads trusts what this process trusts", async () => {
    const saved = process.env.NODE_EXTRA_CA_CERTS;
    process.env.NODE_EXTRA_CA_CERTS = "/etc/ssl/certs/test-bundle.crt";
    try {
      const result = await exec("env", []);
      expect(result.stdout).toContain("NODE_EXTRA_CA_CERTS=/etc/ssl/certs/test-bundle.crt");
      expect(result.stdout).not.toMatch(/^HOME=/m);
    } finally {
      if (saved === undefined) delete process.env.NODE_EXTRA_CA_CERTS;
      else process.env.NODE_EXTRA_CA_CERTS = saved;
    }
  });
});
