import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { readBounded } from "../../shared/read-bounded.ts";

/** An administrator's credentials in Keystone, as the stock clients take them (OS_* or clouds.yaml). */
export interface AdminCredentials {
  authUrl: string;
  username: string;
  password: string;
  userDomainName: string;
  /** A project scope (its name and domain), or the system scope when absent. */
  project?: { name: string; domainName: string };
}

export class CatalogError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CatalogError";
  }
}

const CloudsYaml = z.object({
  clouds: z.record(
    z.string(),
    z.object({
      auth: z.object({
        auth_url: z.string(),
        username: z.string(),
        password: z.string(),
        user_domain_name: z.string().optional(),
        project_name: z.string().optional(),
        project_domain_name: z.string().optional(),
        system_scope: z.string().optional(),
      }),
    }),
  ),
});

/**
 * The admin credentials from the environment as openstackclient reads them: $OS_CLOUD names an entry of
 * clouds.yaml (./, ~/.config/openstack/, /etc/openstack/), else $OS_AUTH_URL, $OS_USERNAME, $OS_PASSWORD,
 * $OS_PROJECT_NAME or $OS_SYSTEM_SCOPE=all, and the domain names (default "Default").
 * @throws CatalogError when something is missing
 */
export function adminCredentialsFromEnv(env: Readonly<Record<string, string | undefined>>): AdminCredentials {
  if (env.OS_CLOUD) {
    const paths = [
      "clouds.yaml",
      join(homedir(), ".config/openstack/clouds.yaml"),
      "/etc/openstack/clouds.yaml",
    ];
    for (const path of env.OS_CLIENT_CONFIG_FILE ? [env.OS_CLIENT_CONFIG_FILE] : paths) {
      let text: string;
      try {
        text = readFileSync(path, "utf8");
      } catch {
        continue;
      }
      const parsed = CloudsYaml.safeParse(parseYaml(text));
      const auth = parsed.success ? parsed.data.clouds[env.OS_CLOUD]?.auth : undefined;
      if (!auth) continue;
      return {
        authUrl: auth.auth_url,
        username: auth.username,
        password: auth.password,
        userDomainName: auth.user_domain_name ?? "Default",
        ...(auth.system_scope === "all" || !auth.project_name
          ? {}
          : { project: { name: auth.project_name, domainName: auth.project_domain_name ?? "Default" } }),
      };
    }
    throw new CatalogError(`cloud ${env.OS_CLOUD} not found in clouds.yaml`);
  }
  const missing = ["OS_AUTH_URL", "OS_USERNAME", "OS_PASSWORD"].filter((name) => !env[name]);
  if (missing.length)
    throw new CatalogError(`set ${missing.join(", ")} (or OS_CLOUD) to an admin's credentials`);
  return {
    authUrl: env.OS_AUTH_URL!,
    username: env.OS_USERNAME!,
    password: env.OS_PASSWORD!,
    userDomainName: env.OS_USER_DOMAIN_NAME ?? "Default",
    ...(env.OS_SYSTEM_SCOPE === "all" || !env.OS_PROJECT_NAME
      ? {}
      : { project: { name: env.OS_PROJECT_NAME, domainName: env.OS_PROJECT_DOMAIN_NAME ?? "Default" } }),
  };
}

export interface Registration {
  /** The service's name in the catalog (Ironic's install guide: "ironic"). */
  serviceName: string;
  region: string;
  /** interface → URL (public, internal, admin). */
  endpoints: Partial<Record<"public" | "internal" | "admin", string>>;
}

const Service = z.object({ id: z.string(), type: z.string(), name: z.string().optional() });
const Endpoint = z.object({
  id: z.string(),
  interface: z.string(),
  url: z.string(),
  region_id: z.string().nullish(),
  region: z.string().nullish(),
});

/**
 * Registers Anvil as the `baremetal` service with its endpoints (idempotent): a service that exists is
 * kept, an endpoint with the right URL is kept, one with another URL is updated; nothing is ever duplicated.
 * Returns what it did, one line per change or check.
 * @throws CatalogError
 */
export async function registerInCatalog(
  admin: AdminCredentials,
  registration: Registration,
): Promise<string[]> {
  try {
    return await register(admin, registration);
  } catch (error) {
    if (error instanceof CatalogError) throw error;
    // undici's fetch says only "fetch failed"; the reason is its cause
    const cause = error instanceof Error && error.cause instanceof Error ? ` (${error.cause.message})` : "";
    throw new CatalogError(
      `Keystone at ${admin.authUrl}: ${error instanceof Error ? error.message : String(error)}${cause}`,
    );
  }
}

async function register(admin: AdminCredentials, registration: Registration): Promise<string[]> {
  const base = admin.authUrl.replace(/\/+$/, "").replace(/(\/v3)?$/, "/v3");
  const issued = await fetch(`${base}/auth/tokens?nocatalog`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      auth: {
        identity: {
          methods: ["password"],
          password: {
            user: { name: admin.username, domain: { name: admin.userDomainName }, password: admin.password },
          },
        },
        scope: admin.project
          ? { project: { name: admin.project.name, domain: { name: admin.project.domainName } } }
          : { system: { all: true } },
      },
    }),
    signal: AbortSignal.timeout(30_000),
  });
  const token = issued.headers.get("x-subject-token");
  await issued.body?.cancel(); // the token is in the header; the body is not read
  if (issued.status !== 201 || !token)
    throw new CatalogError(`Keystone refused the admin credentials (HTTP ${issued.status})`);
  const call = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { "X-Auth-Token": token, "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    if (response.status >= 300)
      throw new CatalogError(
        `${method} ${path}: HTTP ${response.status} ${(await response.text()).slice(0, 300)}`,
      );
    // a catalog answer is a few kB: bounded like every answer from outside
    return response.body
      ? (JSON.parse((await readBounded(response.body, 1024 * 1024)).toString("utf8")) as unknown)
      : null;
  };
  const done: string[] = [];
  const services = z
    .object({ services: z.array(Service) })
    .parse(await call("GET", "/services?type=baremetal")).services;
  let service = services.find((s) => s.name === registration.serviceName) ?? services[0];
  if (!service) {
    service = Service.parse(
      (
        (await call("POST", "/services", {
          service: {
            type: "baremetal",
            name: registration.serviceName,
            description: "Anvil bare metal provisioning",
          },
        })) as { service: unknown }
      ).service,
    );
    done.push(`created service ${service.name ?? ""} (baremetal) ${service.id}`);
  } else done.push(`service ${service.name ?? ""} (baremetal) ${service.id} exists`);
  const endpoints = z
    .object({ endpoints: z.array(Endpoint) })
    .parse(await call("GET", `/endpoints?service_id=${encodeURIComponent(service.id)}`)).endpoints;
  for (const [iface, url] of Object.entries(registration.endpoints)) {
    if (!url) continue;
    const existing = endpoints.find(
      (e) =>
        e.interface === iface && (e.region_id ?? e.region ?? registration.region) === registration.region,
    );
    if (!existing) {
      await call("POST", "/endpoints", {
        endpoint: { service_id: service.id, interface: iface, url, region_id: registration.region },
      });
      done.push(`created ${iface} endpoint ${url}`);
    } else if (existing.url !== url) {
      await call("PATCH", `/endpoints/${encodeURIComponent(existing.id)}`, { endpoint: { url } });
      done.push(`updated ${iface} endpoint ${existing.url} -> ${url}`);
    } else done.push(`${iface} endpoint ${url} exists`);
  }
  return done;
}
