import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeBasic } from "../../conductor/auth/authenticator.ts";
import { CredentialCache } from "../../conductor/auth/credential-cache.ts";
import { InvalidUserFile, parseHtpasswd } from "../../conductor/auth/htpasswd.ts";
import { FailureLimiter } from "../../conductor/auth/rate-limit.ts";
import { MemoryTokenStore, TokenService } from "../../conductor/auth/tokens.ts";
import { htpasswdLine } from "../helpers/auth.ts";

describe("htpasswd", () => {
  it("reads bcrypt entries ($2y$ as Apache writes, $2a$, $2b$), first entry of a user wins", () => {
    const users = parseHtpasswd(`${htpasswdLine("alice", "x")}\n\n  bob:$2b$04$abc\nalice:$2a$04$zzz\n`);
    expect([...users.keys()]).toEqual(["alice", "bob"]);
    expect(users.get("alice")?.startsWith("$2y$")).toBe(true);
  });

  it("refuses an entry that is not bcrypt, as Ironic does", () => {
    expect(() => parseHtpasswd("carol:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=")).toThrow(InvalidUserFile);
    expect(() => parseHtpasswd("carol:$apr1$salt$hash")).toThrow(/Only bcrypt/);
  });
});

describe("decodeBasic", () => {
  it("splits at the first colon; the password may hold colons", () => {
    expect(decodeBasic(Buffer.from("u:p:q").toString("base64"))).toEqual({ user: "u", password: "p:q" });
  });

  it("never throws on hostile tokens, and answers Ironic's 400 message", () => {
    let tried = 0;
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.base64String(),
          fc.uint8Array().map((b) => Buffer.from(b).toString("base64")),
        ),
        (token) => {
          tried++;
          const result = decodeBasic(token);
          if (typeof result === "string") expect(result).toBe("Could not decode authorization token");
          else expect(Buffer.from(token, "base64").toString("utf8")).toContain(":");
        },
      ),
      { numRuns: 2000 },
    );
    console.log(`decodeBasic: ${tried} generated tokens`);
    expect(decodeBasic("not base64!")).toBe("Could not decode authorization token");
    expect(decodeBasic(Buffer.from("nocolon").toString("base64"))).toBe(
      "Could not decode authorization token",
    );
    expect(decodeBasic(Buffer.from([0xff, 0x3a, 0x41]).toString("base64"))).toBe(
      "Could not decode authorization token",
    );
  });
});

describe("credential cache", () => {
  it("hits for the same user and password only, until the TTL or a new generation", () => {
    let now = 0;
    const cache = new CredentialCache<string>({ ttlMs: 1000, maxEntries: 2, now: () => now });
    cache.set("u", "p", { value: "id", generation: 1 });
    expect(cache.get("u", "p", 1)).toBe("id");
    expect(cache.get("u", "q", 1)).toBeUndefined();
    expect(cache.get("u", "p", 2)).toBeUndefined(); // user files reloaded
    cache.set("u", "p", { value: "id", generation: 1 });
    now = 1000;
    expect(cache.get("u", "p", 1)).toBeUndefined();
  });

  it("holds no password in its keys", () => {
    const cache = new CredentialCache<string>({ ttlMs: 1000, maxEntries: 10 });
    cache.set("user", "hunter2-secret", { value: "x", generation: 1 });
    const keys = [...(cache as unknown as { entries: Map<string, unknown> }).entries.keys()];
    expect(keys.join()).not.toContain("hunter2");
    expect(keys.join()).not.toContain("user");
  });

  it("stays bounded", () => {
    const cache = new CredentialCache<string>({ ttlMs: 1000, maxEntries: 3 });
    for (let i = 0; i < 10; i++) cache.set(`u${i}`, "p", { value: "x", generation: 1 });
    expect(cache.size).toBe(3);
    expect(cache.get("u9", "p", 1)).toBe("x");
    expect(cache.get("u0", "p", 1)).toBeUndefined();
  });
});

describe("failure limiter", () => {
  it("refuses a key after maxFailures until its window ends", () => {
    let now = 0;
    const limiter = new FailureLimiter({ maxFailures: 3, windowMs: 60_000, now: () => now });
    for (let i = 0; i < 3; i++) {
      expect(limiter.retryAfterS("k")).toBe(0);
      limiter.fail("k");
    }
    expect(limiter.retryAfterS("k")).toBe(60);
    expect(limiter.retryAfterS("other")).toBe(0);
    now = 59_500;
    expect(limiter.retryAfterS("k")).toBe(1);
    now = 60_000;
    expect(limiter.retryAfterS("k")).toBe(0);
  });
});

describe("tokens", () => {
  const entries = new Map([["alice", "alice-entry-1"]]);
  const credential = (user: string) => entries.get(user);

  it("verify until expiry or revocation; only digests are kept", async () => {
    let now = 1_000_000;
    const store = new MemoryTokenStore();
    const tokens = new TokenService({ store, ttlS: 60, now: () => now, cacheTtlMs: 0 });
    const issued = await tokens.issue("alice", "alice-entry-1");
    expect((await tokens.verify(issued.token, credential))?.user).toBe("alice");
    expect(await tokens.verify(issued.token + "x", credential)).toBeUndefined();
    expect(JSON.stringify([...store.rows])).not.toContain(issued.token);
    now += 60_000;
    expect(await tokens.verify(issued.token, credential)).toBeUndefined();
    const second = await tokens.issue("alice", "alice-entry-1");
    expect(await tokens.revoke(second.id)).toBe(true);
    expect(await tokens.verify(second.token, credential)).toBeUndefined();
  });

  it("dies with its user's entry: changed password or role, or user removed", async () => {
    const store = new MemoryTokenStore();
    const tokens = new TokenService({ store, ttlS: 60 });
    const issued = await tokens.issue("alice", "alice-entry-1");
    expect(await tokens.verify(issued.token, () => "alice-entry-1")).toBeDefined();
    expect(await tokens.verify(issued.token, () => "alice-entry-2")).toBeUndefined();
    expect(await tokens.verify(issued.token, () => undefined)).toBeUndefined();
    // the stored fingerprint is keyed by the token: the entry alone does not reproduce it
    expect(JSON.stringify([...store.rows])).not.toContain("alice-entry-1");
  });

  it("a revocation elsewhere is seen once the cache entry expires", async () => {
    let now = 0;
    const store = new MemoryTokenStore();
    const here = new TokenService({ store, ttlS: 60, now: () => now, cacheTtlMs: 2000 });
    const elsewhere = new TokenService({ store, ttlS: 60, now: () => now });
    const issued = await here.issue("alice", "alice-entry-1");
    expect(await here.verify(issued.token, credential)).toBeDefined();
    expect(await elsewhere.revoke(issued.id)).toBe(true);
    now += 2001;
    expect(await here.verify(issued.token, credential)).toBeUndefined();
  });

  it("never outlives the configured TTL, whatever the client asks", async () => {
    const tokens = new TokenService({ store: new MemoryTokenStore(), ttlS: 60, now: () => 0 });
    expect((await tokens.issue("a", "e", 10_000)).expiresAt).toBe(new Date(60_000).toISOString());
  });

  it("bounds the live tokens of one user", async () => {
    const tokens = new TokenService({ store: new MemoryTokenStore(), ttlS: 60, maxPerUser: 2 });
    await tokens.issue("a", "e");
    await tokens.issue("a", "e");
    await expect(tokens.issue("a", "e")).rejects.toThrow(/too many live tokens/);
    await expect(tokens.issue("b", "e")).resolves.toBeDefined();
  });
});
