// What authentication and TLS cost the API, measured in one run against the same data: the conductor as its own
// process in seven modes (noauth over HTTP; http_basic with the verified-credential cache; http_basic with the
// cache off, i.e. bcrypt per request as a naive implementation would; a bearer token; http_basic over HTTPS;
// a Keystone token with the validated-token cache, and with it off: one Keystone round trip per request),
// each timed on GET /v1/nodes/{id} and GET /v1/nodes?limit=1000 with 8 keep-alive clients.
// Run: flock /tmp/anvil-heavy.lock node --import tsx scripts/bench/api-auth.ts
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent as HttpAgent, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import bcrypt from "bcryptjs";
import { startBenchConductor } from "./conductor-process.ts";
import { HttpBasicAuthenticator } from "../../conductor/auth/authenticator.ts";
import { MemoryTokenStore, TokenService } from "../../conductor/auth/tokens.ts";
import { UserStore } from "../../conductor/auth/user-store.ts";
import { makeLabCa } from "../../conductor/tls/lab-ca.ts";
import { silentLogger } from "../../shared/log.ts";
import { startKeystone } from "../../test/helpers/keystone.ts";
import { closedLoop } from "./closed-loop.ts";

const NODES = Number(process.env.BENCH_NODES ?? 1000);
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 4000);
const CONCURRENCY = 8;
/** Python bcrypt's default cost, what Ironic's own write_password uses. */
const BCRYPT_COST = Number(process.env.BENCH_BCRYPT_COST ?? 12);

interface Mode {
  name: string;
  args: string[];
  env?: Record<string, string>;
  headers: () => Record<string, string>;
  https: boolean;
  samples: number;
}

function startConductor(dir: string, mode: Mode): Promise<{ child: ChildProcess; url: string }> {
  return startBenchConductor(dir, { args: mode.args, env: mode.env, name: mode.name });
}

function client(https: boolean, ca: string) {
  const agent = https
    ? new HttpsAgent({ keepAlive: true, maxSockets: CONCURRENCY, ca })
    : new HttpAgent({ keepAlive: true, maxSockets: CONCURRENCY });
  const call = (
    url: string,
    init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
  ) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const payload = init.body === undefined ? undefined : JSON.stringify(init.body);
      const req = (https ? httpsRequest : httpRequest)(url, {
        method: init.method ?? "GET",
        agent,
        headers: {
          "Content-Type": "application/json",
          "X-OpenStack-Ironic-API-Version": "1.78",
          ...init.headers,
          ...(payload ? { "Content-Length": Buffer.byteLength(payload) } : {}),
        },
      });
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      });
      req.on("error", reject);
      req.end(payload);
    });
  return { call, close: () => agent.destroy() };
}

/** `total` calls of `fn` from CONCURRENCY workers: latency percentiles and throughput. */
async function load(
  total: number,
  fn: () => Promise<void>,
): Promise<{ p50: number; p99: number; rps: number }> {
  const { p50, p99, perS } = await closedLoop(total, CONCURRENCY, fn);
  return { p50, p99, rps: perS };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "anvil-bench-auth-"));
  const lab = await makeLabCa({ dir: join(dir, "tls"), names: ["127.0.0.1"] });
  const ca = readFileSync(lab.caCert, "utf8");
  const userFile = join(dir, "htpasswd");
  writeFileSync(userFile, `ops:$2y$${bcrypt.hashSync("ops-pass", BCRYPT_COST).slice(4)}\n`);
  const basicHeader = { Authorization: `Basic ${Buffer.from("ops:ops-pass").toString("base64")}` };
  let bearer: Record<string, string> = {};
  // a real Keystone (scripts/setup/keystone.sh): Anvil's service user and a system admin to call with
  const keystone = await startKeystone();
  const service = await keystone.project("service");
  await keystone.user("anvil", "anvil-pass", [{ role: "service", project: service }]);
  await keystone.user("ops", "ops-pass", [{ role: "admin", system: true }]);
  const passwordFile = join(dir, "keystone-password");
  writeFileSync(passwordFile, "anvil-pass\n", { mode: 0o600 });
  const keystoneArgs = [
    "--auth-strategy",
    "keystone",
    "--keystone-auth-url",
    keystone.url,
    "--keystone-password-file",
    passwordFile,
  ];
  let keystoneHeader: Record<string, string> = {};
  const auth = ["--auth-strategy", "http_basic", "--http-basic-auth-user-file", userFile];
  const tls = ["--tls-cert", lab.cert, "--tls-key", lab.key, "--tls-ca", lab.caCert];
  const modes: Mode[] = [
    { name: "noauth, http", args: [], headers: () => ({}), https: false, samples: SAMPLES },
    {
      name: "http_basic (cached), http",
      args: auth,
      headers: () => basicHeader,
      https: false,
      samples: SAMPLES,
    },
    { name: "bearer token, http", args: auth, headers: () => bearer, https: false, samples: SAMPLES },
    {
      name: "http_basic (cached), https",
      args: [...auth, ...tls],
      headers: () => basicHeader,
      https: true,
      samples: SAMPLES,
    },
    {
      name: "keystone token (cached), http",
      args: keystoneArgs,
      headers: () => keystoneHeader,
      https: false,
      samples: SAMPLES,
    },
    // Keystone on every request: bookworm's Zed on SQLite serves one validation at a time
    {
      name: "keystone, validate every request",
      args: keystoneArgs,
      env: { ANVIL_KEYSTONE_CACHE_WINDOW_S: "0" },
      headers: () => keystoneHeader,
      https: false,
      samples: Math.max(16, Math.floor(SAMPLES / 200)),
    },
    // last: what a naive http_basic would cost (8 bcrypts queue on one event loop)
    {
      name: "http_basic, bcrypt every request",
      args: auth,
      env: { ANVIL_AUTH_CACHE_TTL_S: "0" },
      headers: () => basicHeader,
      https: false,
      samples: Math.max(16, Math.floor(SAMPLES / 100)),
    },
  ];
  const results: {
    name: string;
    show: Awaited<ReturnType<typeof load>>;
    list: Awaited<ReturnType<typeof load>>;
  }[] = [];
  try {
    for (const [index, mode] of modes.entries()) {
      const { child, url } = await startConductor(dir, mode);
      const { call, close } = client(mode.https, ca);
      try {
        if (index === 0) {
          // the same nodes for every mode: they are created once, in the database file all modes open
          for (let i = 0; i < NODES; i++) {
            const res = await call(`${url}/v1/nodes`, {
              method: "POST",
              body: { name: `bench-${i}`, driver: "fake-hardware", driver_info: { ipmi_password: "secret" } },
            });
            if (res.status !== 201) throw new Error(`create failed: ${res.status} ${res.text}`);
          }
        }
        if (mode.name.startsWith("bearer")) {
          const issued = await call(`${url}/v1/auth/tokens`, { method: "POST", headers: basicHeader });
          bearer = { Authorization: `Bearer ${(JSON.parse(issued.text) as { token: string }).token}` };
        }
        if (mode.name.startsWith("keystone"))
          keystoneHeader = {
            "X-Auth-Token": (await keystone.token("ops", "ops-pass", { system: true })).token,
          };
        const headers = mode.headers();
        const warm = await call(`${url}/v1/nodes/bench-0`, { headers });
        if (warm.status !== 200) throw new Error(`${mode.name}: ${warm.status} ${warm.text}`);
        const show = await load(mode.samples, async () => {
          const res = await call(`${url}/v1/nodes/bench-${Math.floor(Math.random() * NODES)}`, { headers });
          if (res.status !== 200) throw new Error(`${mode.name}: show ${res.status}`);
        });
        const list = await load(Math.max(16, Math.floor(mode.samples / 40)), async () => {
          const res = await call(`${url}/v1/nodes?limit=1000`, { headers });
          if (res.status !== 200) throw new Error(`${mode.name}: list ${res.status}`);
        });
        results.push({ name: mode.name, show, list });
      } finally {
        close();
        child.kill("SIGTERM");
        await new Promise((r) => child.once("exit", r));
      }
    }
  } finally {
    await keystone.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const step = await authStepCost();
  const base = results[0]!;
  const pad = (s: string, n: number) => s.padStart(n);
  console.log(
    `API cost of authentication and TLS: ${NODES} nodes, ${CONCURRENCY} keep-alive clients, bcrypt cost ${BCRYPT_COST}, one run`,
  );
  console.log(
    `${"mode".padEnd(34)}${pad("GET node p50/p99 ms", 22)}${pad("req/s", 9)}${pad("vs noauth", 11)}${pad("list p50 ms", 13)}${pad("vs noauth", 11)}`,
  );
  for (const r of results) {
    console.log(
      `${r.name.padEnd(34)}${pad(`${r.show.p50.toFixed(2)} / ${r.show.p99.toFixed(2)}`, 22)}${pad(r.show.rps.toFixed(0), 9)}${pad(`${(r.show.rps / base.show.rps).toFixed(2)}x`, 11)}${pad(r.list.p50.toFixed(1), 13)}${pad(`${(base.list.p50 / r.list.p50).toFixed(2)}x`, 11)}`,
    );
  }
  console.log(
    `the authentication step alone, in process: ${Object.entries(step)
      .map(([name, us]) => `${name} ${us < 1000 ? `${us.toFixed(1)} µs` : `${(us / 1000).toFixed(0)} ms`}`)
      .join(", ")} per request`,
  );
}

/** The authentication step alone, in this process: microseconds per call (no HTTP, no database). */
async function authStepCost(): Promise<Record<string, number>> {
  const dir = mkdtempSync(join(tmpdir(), "anvil-bench-step-"));
  const userFile = join(dir, "htpasswd");
  writeFileSync(userFile, `ops:${bcrypt.hashSync("ops-pass", BCRYPT_COST)}\n`);
  const users = new UserStore({ userFile, rolesFile: null });
  const tokens = new TokenService({ store: new MemoryTokenStore(), ttlS: 3600 });
  const make = (cacheTtlMs: number) =>
    new HttpBasicAuthenticator({
      users,
      tokens,
      logger: silentLogger,
      cacheTtlMs,
      maxFailures: 10,
      failureWindowMs: 60_000,
    });
  const basicAuth = `Basic ${Buffer.from("ops:ops-pass").toString("base64")}`;
  const cases: [string, HttpBasicAuthenticator, string, number][] = [
    ["http_basic, cached", make(60_000), basicAuth, 20_000],
    [
      "bearer token",
      make(60_000),
      `Bearer ${(await tokens.issue("ops", users.credential("ops") ?? "")).token}`,
      20_000,
    ],
    ["http_basic, bcrypt", make(0), basicAuth, 8],
  ];
  const out: Record<string, number> = {};
  for (const [name, authenticator, authorization, calls] of cases) {
    await authenticator.authenticate({ authorization, source: "bench" });
    const t = performance.now();
    for (let i = 0; i < calls; i++) {
      const result = await authenticator.authenticate({ authorization, source: "bench" });
      if (!result.ok) throw new Error(`${name}: ${result.message}`);
    }
    out[name] = ((performance.now() - t) * 1000) / calls;
  }
  rmSync(dir, { recursive: true, force: true });
  return out;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
