import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, faultOf, startConductor } from "../helpers/conductor.ts";
import { runCli } from "../../conductor/cli/cli.ts";
import { exec } from "../../shared/system/exec.ts";
import { REPO_ROOT } from "../../scripts/lab/lab.ts";
import { startKeystone, type Scope, type ThrowawayKeystone } from "../helpers/keystone.ts";

// Tokens live 40 s in this Keystone: long enough for one test's requests, short enough to wait one out.
const TOKEN_EXPIRATION_S = 40;
const PASSWORD = "pw-keystone-test";

let keystone: ThrowawayKeystone;
/** Cache window 300 s (the default). */
let cached: Awaited<ReturnType<typeof startConductor>>;
/** Cache window 0: every request asks Keystone. */
let uncached: Awaited<ReturnType<typeof startConductor>>;
const dir = mkdtempSync(join(tmpdir(), "anvil-keystone-test-"));
const projects: Record<string, string> = {};
const nodes: Record<string, string> = {};

const USERS: { name: string; grants: { role: string; project?: string; system?: true }[]; scope: Scope }[] = [
  { name: "sysadmin", grants: [{ role: "admin", system: true }], scope: { system: true } },
  { name: "sysreader", grants: [{ role: "reader", system: true }], scope: { system: true } },
  { name: "a-admin", grants: [{ role: "admin", project: "A" }], scope: { project: "A" } },
  { name: "a-member", grants: [{ role: "member", project: "A" }], scope: { project: "A" } },
  { name: "a-reader", grants: [{ role: "reader", project: "A" }], scope: { project: "A" } },
  { name: "b-member", grants: [{ role: "member", project: "B" }], scope: { project: "B" } },
  { name: "nova", grants: [{ role: "service", project: "service" }], scope: { project: "service" } },
];

async function tokenOf(user: string): Promise<string> {
  const entry = USERS.find((u) => u.name === user);
  return (await keystone.token(user, PASSWORD, entry?.scope)).token;
}

/** One request to `url` with `token` as X-Auth-Token (undefined: none). */
const as = (
  [url, token]: [string, string | undefined],
  path: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
) =>
  api(`${url}${path}`, {
    ...init,
    headers: { ...(token ? { "X-Auth-Token": token } : {}), ...init.headers },
  });

const names = (body: unknown): string[] =>
  (body as { nodes: { name: string }[] }).nodes.map((n) => n.name).sort();

// Keystone start (~14 s) and ~30 calls of ~0.5-3 s each on a loaded 2-core machine: a generous bound
beforeAll(async () => {
  keystone = await startKeystone({ tokenExpirationS: TOKEN_EXPIRATION_S });
  // Keystone serves one request at a time (SQLite): side by side only overlaps the client side
  await Promise.all(
    ["A", "B", "service"].map(async (name) => {
      projects[name] = await keystone.project(name);
    }),
  );
  await Promise.all([
    keystone.user("anvil", PASSWORD, [{ role: "service", project: projects.service }]),
    ...USERS.map((u) =>
      keystone.user(
        u.name,
        PASSWORD,
        u.grants.map((g) => ({ ...g, project: g.project && projects[g.project] })),
      ),
    ),
  ]);
  const passwordFile = join(dir, "keystone-password");
  writeFileSync(passwordFile, `${PASSWORD}\n`);
  chmodSync(passwordFile, 0o600);
  const keystoneConfig = { authUrl: keystone.url, username: "anvil", passwordFile };
  cached = await startConductor({ auth: { auth_strategy: "keystone" }, keystone: keystoneConfig });
  uncached = await startConductor({
    auth: { auth_strategy: "keystone" },
    keystone: { ...keystoneConfig, cacheWindowS: 0 },
  });
  const admin = await tokenOf("sysadmin");
  for (const ctx of [cached, uncached])
    for (const [name, owner] of [
      ["node-a", projects.A],
      ["node-b", projects.B],
      ["node-free", undefined],
    ] as const) {
      const created = await as([ctx.url, admin], "/v1/nodes", {
        method: "POST",
        body: { driver: "fake-hardware", name, ...(owner ? { owner } : {}) },
      });
      expect(created.status).toBe(201);
      nodes[name] = (created.body as { uuid: string }).uuid;
    }
}, 300_000);

afterAll(async () => {
  await cached?.stop();
  await uncached?.stop();
  await keystone?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("auth_strategy=keystone against a real Keystone", () => {
  it("answers 401 with Keystone's hint without a token, whatever identity headers a client sends", async () => {
    const refused = await as([cached.url, undefined], "/v1/nodes", {
      headers: { "X-Roles": "admin", "X-Project-Id": projects.A!, "X-Identity-Status": "Confirmed" },
    });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toBe(`Keystone uri="${keystone.url}"`);
    expect(refused.body).toEqual({
      error: {
        code: 401,
        title: "Unauthorized",
        message: "The request you have made requires authentication.",
      },
    });
    expect((await as([cached.url, "not-a-token"], "/v1/nodes")).status).toBe(401);
    // version discovery stays public, as in Ironic
    expect((await as([cached.url, undefined], "/v1")).status).toBe(200);
  });

  it("maps system scope and roles: a system admin sees and changes the fleet, a system reader only reads", async () => {
    const admin = await tokenOf("sysadmin");
    expect(names((await as([cached.url, admin], "/v1/nodes")).body)).toEqual([
      "node-a",
      "node-b",
      "node-free",
    ]);
    const reader = await tokenOf("sysreader");
    expect(names((await as([cached.url, reader], "/v1/nodes")).body)).toEqual([
      "node-a",
      "node-b",
      "node-free",
    ]);
    const patch = [{ op: "add", path: "/extra/by", value: "reader" }];
    expect(
      (await as([cached.url, reader], "/v1/nodes/node-free", { method: "PATCH", body: patch })).status,
    ).toBe(403);
    expect(
      (await as([cached.url, admin], "/v1/nodes/node-free", { method: "PATCH", body: patch })).status,
    ).toBe(200);
  });

  it("maps project scope to owner: members change their project's nodes, readers read, others see nothing", async () => {
    const member = await tokenOf("a-member");
    expect(names((await as([cached.url, member], "/v1/nodes")).body)).toEqual(["node-a"]);
    const patch = [{ op: "add", path: "/extra/by", value: "a-member" }];
    expect(
      (await as([cached.url, member], "/v1/nodes/node-a", { method: "PATCH", body: patch })).status,
    ).toBe(200);
    expect((await as([cached.url, member], "/v1/nodes/node-b")).status).toBe(404);
    const reader = await tokenOf("a-reader");
    expect((await as([cached.url, reader], "/v1/nodes/node-a")).status).toBe(200);
    expect(
      (await as([cached.url, reader], "/v1/nodes/node-a", { method: "PATCH", body: patch })).status,
    ).toBe(403);
    // wrong project: B's member cannot see A's node
    const other = await tokenOf("b-member");
    expect(names((await as([cached.url, other], "/v1/nodes")).body)).toEqual(["node-b"]);
    expect((await as([cached.url, other], "/v1/nodes/node-a")).status).toBe(404);
    // a project admin is not a system admin
    const projectAdmin = await tokenOf("a-admin");
    const create = await as([cached.url, projectAdmin], "/v1/nodes", {
      method: "POST",
      body: { driver: "fake-hardware", name: "x", owner: projects.B },
    });
    expect(create.status).toBe(403);
  });

  it("gives the service role in the service project system-member reach, as Ironic's service_role", async () => {
    const nova = await tokenOf("nova");
    expect(names((await as([cached.url, nova], "/v1/nodes")).body)).toEqual([
      "node-a",
      "node-b",
      "node-free",
    ]);
    const patch = [{ op: "add", path: "/instance_info/image_source", value: "http://example.invalid/i.img" }];
    expect((await as([cached.url, nova], "/v1/nodes/node-b", { method: "PATCH", body: patch })).status).toBe(
      200,
    );
    // system member, not system admin
    expect((await as([cached.url, nova], "/v1/nodes/node-free", { method: "DELETE" })).status).toBe(403);
  });

  it("refuses unscoped tokens", async () => {
    const unscoped = (await keystone.token("a-member", PASSWORD, undefined)).token;
    const refused = await as([uncached.url, unscoped], "/v1/nodes");
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toContain("Keystone uri=");
  });

  it("refuses a revoked token; a cached one only after its window (0 s here, 300 s by default)", async () => {
    const fresh = await tokenOf("a-member");
    await keystone.revoke(fresh);
    expect((await as([cached.url, fresh], "/v1/nodes")).status).toBe(401);

    const used = await tokenOf("a-member");
    expect((await as([uncached.url, used], "/v1/nodes")).status).toBe(200);
    expect((await as([cached.url, used], "/v1/nodes")).status).toBe(200);
    await keystone.revoke(used);
    expect((await as([uncached.url, used], "/v1/nodes")).status).toBe(401);
    // the stated window: the conductor caching for 300 s still honours it until then
    expect((await as([cached.url, used], "/v1/nodes")).status).toBe(200);
  });

  it("refuses an expired token, cached or not", async () => {
    const { token, expiresAt } = await keystone.token("a-member", PASSWORD, { project: "A" });
    expect((await as([cached.url, token], "/v1/nodes")).status).toBe(200);
    // wait the token out (Keystone's clock is this machine's)
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt - Date.now()) + 1500));
    expect((await as([cached.url, token], "/v1/nodes")).status).toBe(401);
    expect((await as([uncached.url, token], "/v1/nodes")).status).toBe(401);
  }, 90_000);

  it("registers itself in the catalog with admin credentials from the environment, idempotently", async () => {
    // a Keystone of its own: the shared one's SQLite was seen "database is locked" on endpoint creation
    // after the set-up's ~30 writes (Keystone's own session handling; a fresh one registers cleanly)
    const fresh = await startKeystone({ tokenExpirationS: 3600 });
    try {
      const register = async (publicUrl: string) => {
        let out = "";
        let err = "";
        const argv = [
          "keystone",
          "register",
          "--public-url",
          publicUrl,
          "--internal-url",
          "http://10.0.0.5:6385",
        ];
        // as an operator runs it: its own process (in-process, the test's pooled keep-alive connections to
        // this single-threaded Keystone went stale under the command's calls)
        const run = await exec(process.execPath, ["--import", "tsx", "conductor/cli/main.ts", ...argv], {
          cwd: REPO_ROOT,
          env: {
            OS_AUTH_URL: fresh.url,
            OS_USERNAME: "admin",
            OS_PASSWORD: fresh.adminPassword,
            OS_SYSTEM_SCOPE: "all",
          },
          timeoutMs: 120_000,
        });
        out = run.stdout;
        err = run.stderr;
        return { code: run.code, out, err };
      };
      const first = await register(cached.url);
      expect(first).toMatchObject({ code: 0, err: "" });
      expect(first.out).toMatch(/created service ironic \(baremetal\)/);
      expect(first.out).toContain(`created public endpoint ${cached.url}`);
      const again = await register(cached.url);
      expect(again.code).toBe(0);
      expect(again.out).not.toContain("created");
      const moved = await register("https://anvil.example:6385");
      expect(moved.out).toContain(`updated public endpoint ${cached.url} -> https://anvil.example:6385`);
      // the catalog as Keystone keeps it: one baremetal service, one endpoint per interface
      const { token } = await fresh.token("admin", fresh.adminPassword, { system: true });
      const read = async <T>(path: string): Promise<T> =>
        (await (await fetch(`${fresh.url}${path}`, { headers: { "X-Auth-Token": token } })).json()) as T;
      const { services } = await read<{ services: { id: string }[] }>("/services?type=baremetal");
      expect(services).toHaveLength(1);
      const { endpoints } = await read<{ endpoints: { interface: string; url: string }[] }>(
        `/endpoints?service_id=${services[0]!.id}`,
      );
      expect(endpoints.map((e) => `${e.interface} ${e.url}`).sort()).toEqual([
        "internal http://10.0.0.5:6385",
        "public https://anvil.example:6385",
      ]);
      // no secret on the command line: a missing password is a clear refusal
      let err = "";
      const code = await runCli(["keystone", "register", "--public-url", cached.url], {
        env: { OS_AUTH_URL: fresh.url, OS_USERNAME: "admin" },
        stdout: { write: () => true },
        stderr: { write: (text: string) => ((err += text), true) },
      });
      expect(code).toBe(1);
      expect(err).toContain("OS_PASSWORD");
    } finally {
      await fresh.stop();
    }
  }, 300_000);
  it("answers 503 in Ironic's envelope for a new token while Keystone is down; cached tokens keep working", async () => {
    const known = await tokenOf("a-member");
    const unknown = await tokenOf("b-member");
    expect((await as([cached.url, known], "/v1/nodes")).status).toBe(200);
    await keystone.pause();
    const down = await as([cached.url, unknown], "/v1/nodes");
    expect(down.status).toBe(503);
    expect(faultOf(down.body)).toBe("The Keystone service is temporarily unavailable.");
    expect(JSON.parse((down.body as { error_message: string }).error_message).faultcode).toBe("Server");
    expect((await as([uncached.url, known], "/v1/nodes")).status).toBe(503);
    const stillKnown = await as([cached.url, known], "/v1/nodes");
    expect(stillKnown.status).toBe(200);
    expect(names(stillKnown.body)).toEqual(["node-a"]);
  });
});
