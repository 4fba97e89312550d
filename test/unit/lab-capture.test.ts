import { createHash, randomBytes } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { findTokenByDigest } from "../../scripts/lab/capture.ts";

const digest = (token: string): string => createHash("sha256").update(token, "utf8").digest("hex");

describe("finding an agent token in captured bytes by its SHA-256 alone", () => {
  const token = randomBytes(32).toString("base64url");

  it("finds it wherever it sits, whatever surrounds it (base64url neighbours included)", () => {
    let runs = 0;
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.uint8Array({ maxLength: 300 }), (before, after) => {
        runs++;
        const bytes = Buffer.concat([before, Buffer.from(token, "latin1"), after]);
        expect(findTokenByDigest(bytes, new Set([digest(token)]))).toBe(token);
      }),
      { numRuns: 300 },
    );
    console.log(`token found in ${runs} generated surroundings`);
  });

  it("finds nothing in bytes that do not hold it, even with near misses", () => {
    const nearMiss = Buffer.from(`"token":"${token.slice(0, 42)}" ${token.slice(1)}x`, "latin1");
    expect(
      findTokenByDigest(Buffer.concat([randomBytes(4096), nearMiss]), new Set([digest(token)])),
    ).toBeNull();
    expect(findTokenByDigest(new Uint8Array(0), new Set([digest(token)]))).toBeNull();
  });
});
