import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/** A new agent token (32 random bytes, base64url) and the digest that is all the database keeps. */
export function issueToken(): { token: string; digest: string } {
  const token = randomBytes(32).toString("base64url");
  return { token, digest: digestToken(token) };
}

export function digestToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** Compares in constant time: both sides are fixed-length digests, so the length check leaks nothing. */
export function tokenMatches(token: string, digest: string): boolean {
  const expected = Buffer.from(digest, "hex");
  const actual = createHash("sha256").update(token, "utf8").digest();
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}
