import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const SCRIPT = "scripts/setup/keystone.sh";

export type Scope = { project: string } | { system: true } | undefined;

export interface ThrowawayKeystone {
  /** http://127.0.0.1:PORT/v3 */
  url: string;
  adminPassword: string;
  /** A token for `user` (Default domain) in `scope` (a project name, the system, or none). */
  token(user: string, password: string, scope: Scope): Promise<{ token: string; expiresAt: number }>;
  /** Creates a project (Default domain); returns its id. */
  project(name: string): Promise<string>;
  /** Creates a user with `role` on a project (by id) or the system; returns the user's id. */
  user(
    name: string,
    password: string,
    grants: { role: string; project?: string; system?: true }[],
  ): Promise<string>;
  revoke(token: string): Promise<void>;
  /** Stops Keystone (uwsgi), an outage; the data stays until stop(). */
  pause(): Promise<void>;
  stop(): Promise<void>;
}

async function call(
  url: string,
  init: { method?: string; token?: string; body?: unknown; headers?: Record<string, string> },
): Promise<Response> {
  return fetch(url, {
    method: init.method ?? "GET",
    headers: {
      "Content-Type": "application/json",
      ...(init.token ? { "X-Auth-Token": init.token } : {}),
      ...init.headers,
    },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
}

/**
 * A real Keystone (Debian's, Zed) on loopback in a temp dir (scripts/setup/keystone.sh): SQLite, fernet tokens,
 * bootstrapped with an admin user and the `service` project.
 * @throws with the script's own message when it cannot start: a test never skips for want of one
 */
export async function startKeystone(options: { tokenExpirationS?: number } = {}): Promise<ThrowawayKeystone> {
  const dir = mkdtempSync(join(tmpdir(), "anvil-keystone-"));
  const adminPassword = randomBytes(12).toString("hex");
  const env = {
    ...process.env,
    OS_BOOTSTRAP_PASSWORD: adminPassword,
    KEYSTONE_TOKEN_EXPIRATION: String(options.tokenExpirationS ?? 3600),
  };
  const start = async (): Promise<string> => {
    try {
      return (await run("bash", [SCRIPT, "start", dir], { timeout: 120_000, env })).stdout.trim();
    } catch (error) {
      const stderr = error instanceof Error && "stderr" in error ? String(error.stderr) : "";
      throw new Error(`Keystone did not start (${SCRIPT}): ${stderr || String(error)}`);
    }
  };
  let url: string;
  try {
    url = await start();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const token: ThrowawayKeystone["token"] = async (user, password, scope) => {
    const response = await call(`${url}/auth/tokens?nocatalog`, {
      method: "POST",
      body: {
        auth: {
          identity: {
            methods: ["password"],
            password: { user: { name: user, domain: { id: "default" }, password } },
          },
          ...(scope === undefined
            ? {}
            : "system" in scope
              ? { scope: { system: { all: true } } }
              : { scope: { project: { name: scope.project, domain: { id: "default" } } } }),
        },
      },
    });
    if (response.status !== 201)
      throw new Error(`token for ${user}: HTTP ${response.status} ${await response.text()}`);
    const body = (await response.json()) as { token: { expires_at: string } };
    return {
      token: response.headers.get("x-subject-token") ?? "",
      expiresAt: Date.parse(body.token.expires_at),
    };
  };
  let adminToken: { token: string; expiresAt: number } | undefined;
  const admin = async (): Promise<string> => {
    if (!adminToken || adminToken.expiresAt - 5000 < Date.now())
      adminToken = await token("admin", adminPassword, { system: true });
    return adminToken.token;
  };
  const roles = new Map<string, Promise<string>>();
  // one look-up per role name, even for users made side by side
  const roleId = (name: string): Promise<string> => {
    let id = roles.get(name);
    if (!id) roles.set(name, (id = findOrCreateRole(name)));
    return id;
  };
  const findOrCreateRole = async (name: string): Promise<string> => {
    const response = await call(`${url}/roles?name=${name}`, { token: await admin() });
    const found = ((await response.json()) as { roles: { id: string }[] }).roles;
    if (found[0]) return found[0].id;
    const created = await call(`${url}/roles`, {
      method: "POST",
      token: await admin(),
      body: { role: { name } },
    });
    return ((await created.json()) as { role: { id: string } }).role.id;
  };
  const expect2xx = async (response: Response, what: string): Promise<Response> => {
    if (response.status >= 300) throw new Error(`${what}: HTTP ${response.status} ${await response.text()}`);
    return response;
  };
  return {
    url,
    adminPassword,
    token,
    async project(name) {
      const response = await expect2xx(
        await call(`${url}/projects`, {
          method: "POST",
          token: await admin(),
          body: { project: { name, domain_id: "default" } },
        }),
        `project ${name}`,
      );
      return ((await response.json()) as { project: { id: string } }).project.id;
    },
    async user(name, password, grants) {
      const response = await expect2xx(
        await call(`${url}/users`, {
          method: "POST",
          token: await admin(),
          body: { user: { name, password, domain_id: "default" } },
        }),
        `user ${name}`,
      );
      const id = ((await response.json()) as { user: { id: string } }).user.id;
      for (const grant of grants) {
        const role = await roleId(grant.role);
        const path = grant.system
          ? `/system/users/${id}/roles/${role}`
          : `/projects/${grant.project}/users/${id}/roles/${role}`;
        await expect2xx(
          await call(`${url}${path}`, { method: "PUT", token: await admin() }),
          `grant ${grant.role} to ${name}`,
        );
      }
      return id;
    },
    async revoke(subject) {
      await expect2xx(
        await call(`${url}/auth/tokens`, {
          method: "DELETE",
          token: await admin(),
          headers: { "X-Subject-Token": subject },
        }),
        "revoke",
      );
    },
    async pause() {
      await run("bash", [SCRIPT, "stop", dir], { timeout: 60_000 });
    },
    async stop() {
      await run("bash", [SCRIPT, "stop", dir], { timeout: 60_000 }).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
