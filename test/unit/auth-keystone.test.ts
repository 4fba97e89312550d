import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { KeystoneAuthenticator, KeystoneUnavailable } from "../../conductor/auth/keystone.ts";
import { KeystoneTokenBody, identityFromToken } from "../../conductor/auth/keystone-token.ts";
import { silentLogger } from "../../shared/log.ts";

const NOW = Date.parse("2026-01-01T00:00:00Z");
const LATER = "2026-01-01T01:00:00.000000Z";

function body(token: Record<string, unknown>): unknown {
  return { token: { expires_at: LATER, user: { id: "u1", name: "alice" }, ...token } };
}
const roles = (...names: string[]) => names.map((name, i) => ({ id: `r${i}`, name }));

function verdict(raw: unknown) {
  const parsed = KeystoneTokenBody.safeParse(raw);
  if (!parsed.success) return { parsed: false as const };
  return {
    parsed: true as const,
    ...identityFromToken(parsed.data, { serviceProjectName: "service", now: NOW }),
  };
}

describe("Keystone token body → policy identity", () => {
  it("maps system scope to the system persona of the strongest role", () => {
    const v = verdict(body({ system: { all: true }, roles: roles("reader", "member", "admin") }));
    expect(v).toMatchObject({
      ok: true,
      value: { identity: { role: "admin", project: null, method: "keystone" } },
    });
    expect(verdict(body({ system: { all: true }, roles: roles("reader") }))).toMatchObject({
      value: { identity: { role: "reader", project: null } },
    });
  });

  it("maps project scope to the project's id with its role", () => {
    const v = verdict(body({ project: { id: "p-a", name: "A" }, roles: roles("member", "reader") }));
    expect(v).toMatchObject({
      ok: true,
      value: { identity: { user: "alice", role: "member", project: "p-a" } },
    });
    expect(v.parsed && v.ok && v.value.expiresAt).toBe(Date.parse(LATER));
  });

  it("makes the service role a system member only in the service project (Ironic's service_role)", () => {
    expect(verdict(body({ project: { id: "p-s", name: "service" }, roles: roles("service") }))).toMatchObject(
      {
        value: { identity: { role: "member", project: null } },
      },
    );
    expect(verdict(body({ project: { id: "p-x", name: "other" }, roles: roles("service") }))).toMatchObject({
      value: { identity: { role: null, project: "p-x" } },
    });
  });

  it("refuses unscoped, domain-scoped and expired tokens", () => {
    expect(verdict(body({ roles: [] }))).toMatchObject({ ok: false, reason: "unscoped token" });
    expect(verdict(body({ domain: { id: "default", name: "Default" } }))).toMatchObject({
      ok: false,
      reason: "domain-scoped token",
    });
    expect(
      verdict(
        body({ project: { id: "p", name: "A" }, roles: roles("admin"), expires_at: "2025-12-31T23:59:59Z" }),
      ),
    ).toMatchObject({ ok: false, reason: "token expired" });
    expect(verdict(body({ project: { id: "p", name: "A" }, expires_at: "tomorrow-ish" }))).toMatchObject({
      ok: false,
    });
  });

  it("never throws on hostile shapes, and never grants a role the body does not name", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.anything(),
          fc.record({
            token: fc.record(
              {
                expires_at: fc.oneof(fc.string(), fc.constant(LATER), fc.integer()),
                user: fc.oneof(fc.anything(), fc.record({ id: fc.string(), name: fc.string() })),
                roles: fc.oneof(
                  fc.anything(),
                  fc.array(
                    fc.record({
                      id: fc.string(),
                      name: fc.oneof(fc.string(), fc.constantFrom("admin", "service")),
                    }),
                  ),
                ),
                project: fc.oneof(fc.anything(), fc.record({ id: fc.string(), name: fc.string() })),
                system: fc.oneof(fc.anything(), fc.record({ all: fc.boolean() })),
              },
              { requiredKeys: [] },
            ),
          }),
        ),
        (raw) => {
          const v = verdict(raw);
          if (!v.parsed || !v.ok) return;
          const token = (raw as { token: { roles?: { name?: string }[] } }).token;
          const names = (token.roles ?? []).map((r) => r.name);
          const role = v.value.identity.role;
          if (role === "admin") expect(names).toContain("admin");
          if (role === "member") expect(names.includes("member") || names.includes("service")).toBe(true);
          if (role === "reader") expect(names).toContain("reader");
          expect(v.value.expiresAt).toBeGreaterThan(NOW);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("refuses oversized role lists and names", () => {
    const many = roles(...Array.from({ length: 300 }, (_, i) => `role-${i}`));
    expect(verdict(body({ project: { id: "p", name: "A" }, roles: many })).parsed).toBe(false);
    expect(verdict(body({ project: { id: "x".repeat(256), name: "A" } })).parsed).toBe(false);
  });
});

/** A Keystone stand-in counting validations; `answer` decides each one. */
function fakeKeystone(answer: (token: string) => unknown) {
  const seen: string[] = [];
  return {
    seen,
    client: {
      validate: async (token: string) => {
        seen.push(token);
        const result = answer(token);
        if (result instanceof Error) throw result;
        return result;
      },
    },
  };
}

function authenticator(
  client: { validate(token: string): Promise<unknown> },
  options: { cacheWindowMs?: number; cacheMaxEntries?: number; clock?: { now: number } } = {},
) {
  const clock = options.clock ?? { now: NOW };
  return new KeystoneAuthenticator({
    client,
    logger: silentLogger,
    wwwAuthenticateUri: "http://keystone.test/v3",
    serviceProjectName: "service",
    cacheWindowMs: options.cacheWindowMs ?? 300_000,
    cacheMaxEntries: options.cacheMaxEntries ?? 100,
    now: () => clock.now,
  });
}

const member = body({ project: { id: "p-a", name: "A" }, roles: roles("member", "reader") });
const asToken = (authToken: string | undefined) => ({
  authorization: undefined,
  authToken,
  source: "127.0.0.1",
});

describe("KeystoneAuthenticator", () => {
  it("answers 401 with Keystone's hint for no token, a malformed one, or one Keystone does not know", async () => {
    const ks = fakeKeystone(() => null);
    const auth = authenticator(ks.client);
    for (const token of [undefined, "", "bad token with spaces", "x".repeat(9000), "unknown"]) {
      const result = await auth.authenticate(asToken(token));
      expect(result).toMatchObject({
        ok: false,
        status: 401,
        wwwAuthenticate: 'Keystone uri="http://keystone.test/v3"',
      });
    }
    expect(ks.seen).toEqual(["unknown"]);
  });

  it("caches a valid token for the window, keyed by a digest, and asks again after it", async () => {
    const clock = { now: NOW };
    const ks = fakeKeystone(() => member);
    const auth = authenticator(ks.client, { cacheWindowMs: 60_000, clock });
    const [a, b] = await Promise.all([
      auth.authenticate(asToken("tok-1")),
      auth.authenticate(asToken("tok-1")),
    ]);
    expect(a).toMatchObject({ ok: true, identity: { project: "p-a", role: "member" } });
    expect(b).toEqual(a);
    expect(ks.seen).toHaveLength(1);
    clock.now += 59_000;
    await auth.authenticate(asToken("tok-1"));
    expect(ks.seen).toHaveLength(1);
    clock.now += 2_000;
    await auth.authenticate(asToken("tok-1"));
    expect(ks.seen).toHaveLength(2);
    // the cache never holds the token itself
    const internals = JSON.stringify([...(auth as unknown as { cache: Map<string, unknown> }).cache.keys()]);
    expect(internals).not.toContain("tok-1");
  });

  it("never trusts a cached token past its expiry, whatever the window", async () => {
    const clock = { now: NOW };
    const soon = body({
      project: { id: "p-a", name: "A" },
      roles: roles("member"),
      expires_at: "2026-01-01T00:00:10Z",
    });
    const ks = fakeKeystone(() => (clock.now < Date.parse("2026-01-01T00:00:10Z") ? soon : null));
    const auth = authenticator(ks.client, { clock });
    expect((await auth.authenticate(asToken("t"))).ok).toBe(true);
    clock.now += 11_000;
    expect(await auth.authenticate(asToken("t"))).toMatchObject({ ok: false, status: 401 });
  });

  it("answers 503 when Keystone is unavailable or its body is unreadable; cached tokens keep working", async () => {
    let up = true;
    const ks = fakeKeystone((token) =>
      !up ? new KeystoneUnavailable("down") : token === "garbled" ? { token: { roles: "x" } } : member,
    );
    const auth = authenticator(ks.client);
    expect((await auth.authenticate(asToken("known"))).ok).toBe(true);
    expect(await auth.authenticate(asToken("garbled"))).toMatchObject({ ok: false, status: 503 });
    up = false;
    expect(await auth.authenticate(asToken("new"))).toMatchObject({ ok: false, status: 503 });
    expect(await auth.authenticate(asToken("known"))).toMatchObject({ ok: true });
  });

  it("stays within its entry bound", async () => {
    const ks = fakeKeystone(() => member);
    const auth = authenticator(ks.client, { cacheMaxEntries: 10 });
    for (let i = 0; i < 50; i++) await auth.authenticate(asToken(`t-${i}`));
    expect(auth.cacheSize).toBeLessThanOrEqual(10);
  });

  it("does not cache with a zero window", async () => {
    const ks = fakeKeystone(() => member);
    const auth = authenticator(ks.client, { cacheWindowMs: 0 });
    await auth.authenticate(asToken("t"));
    await auth.authenticate(asToken("t"));
    expect(ks.seen).toHaveLength(2);
  });
});
