// Routing benchmark (issue #14): what it costs to route a node action to the node's owner. Three conductor
// processes share one throwaway PostgreSQL; at client concurrency 1 and 8 it measures
//   (a) an owner-routed call served by the owner directly,
//   (b) the same call sent to a conductor that does not own the node, forwarded over HTTP (conductor/api/forward),
//   (c) a LISTEN/NOTIFY round trip on the same PostgreSQL server (a prototype that lives only here): one client
//       NOTIFYs a request the size of a forwarded one, another LISTENs and answers with a NOTIFY on a reply channel.
// Prints p50/p99 and rate for each, forwarded/direct, and the NOTIFY round trip beside the HTTP hop
// (forwarded − direct). Run it under `flock /tmp/anvil-heavy.lock`. BENCH_CALLS sets the calls per measure.
// BENCH_BASELINE_REV=<git revision> also runs (a) and (b) on three conductors of that revision (extracted with
// git archive, on their own database of the same server), alternating with this checkout's in the same rounds,
// to show a change's before/after.
import { throwawayPostgres } from "./throwaway-postgres.ts";
import { execFileSync, type ChildProcess } from "node:child_process";
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { Agent, request } from "undici";
import { startBenchConductor } from "./conductor-process.ts";
import { percentile } from "./percentile.ts";

const CALLS = Number(process.env.BENCH_CALLS ?? 2_000);
const BASELINE_REV = process.env.BENCH_BASELINE_REV;
const WARMUP = 200;
// direct and forwarded runs alternate in rounds, so a neighbour's load on the shared machine hits both alike
const ROUNDS = 4;
const CONDUCTORS = 3;
const NODES = 24;
const HEADERS = { "content-type": "application/json", "x-openstack-ironic-api-version": "1.78" };

// The bench's own client keeps its connections, so what differs between (a) and (b) is the conductors' hop.
const client = new Agent({ keepAliveTimeout: 60_000, connections: 16 });

async function call(
  url: string,
  init: { method?: "GET" | "PUT" | "POST"; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; text: string }> {
  const response = await request(url, {
    method: init.method ?? "GET",
    headers: { ...HEADERS, ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    dispatcher: client,
  });
  return { status: response.statusCode, text: await response.body.text() };
}

interface Figures {
  p50: number;
  p99: number;
  perS: number;
}

interface Samples {
  times: number[];
  seconds: number;
}

/** Runs `count` jobs `concurrency` at a time; each job's latency (ms) and the wall time. */
async function load(
  options: { count: number; concurrency: number },
  job: (i: number) => Promise<void>,
): Promise<Samples> {
  const times: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: options.concurrency }, async () => {
      while (next < options.count) {
        const i = next++;
        const t = performance.now();
        await job(i);
        times.push(performance.now() - t);
      }
    }),
  );
  return { times, seconds: (performance.now() - started) / 1000 };
}

function summarize(samples: Samples[]): Figures {
  const times = samples.flatMap((s) => s.times).sort((a, b) => a - b);
  const seconds = samples.reduce((sum, s) => sum + s.seconds, 0);
  return { p50: percentile(times, 50), p99: percentile(times, 99), perS: times.length / seconds };
}

/** Warms up, then runs each series in `ROUNDS` alternating slices of CALLS / ROUNDS calls. */
async function alternating(
  concurrency: number,
  series: ((i: number) => Promise<void>)[],
  between?: (index: number, phase: "before" | "after") => void,
): Promise<Figures[]> {
  for (const job of series) for (let i = 0; i < WARMUP; i++) await job(i);
  const samples: Samples[][] = series.map(() => []);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [index, job] of series.entries()) {
      between?.(index, "before");
      samples[index]!.push(await load({ count: Math.ceil(CALLS / ROUNDS), concurrency }, job));
      between?.(index, "after");
    }
  }
  return samples.map(summarize);
}

/** Inodes of this process's own sockets (the bench's client connections). */
function ownSockets(): Set<string> {
  const inodes = new Set<string>();
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (match?.[1]) inodes.add(match[1]);
    } catch {
      // closed meanwhile
    }
  }
  return inodes;
}

/**
 * TCP sockets (TIME_WAIT included, which outlive a closed connection for a minute) whose remote port is one of
 * `ports`, not counting the bench's own: connections between conductors. A new connection per call leaves one each.
 */
function socketsTo(ports: ReadonlySet<number>): number {
  const own = ownSockets();
  let count = 0;
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      const port = fields[2] ? parseInt(fields[2].split(":").at(-1) ?? "", 16) : NaN;
      if (ports.has(port) && !own.has(fields[9] ?? "")) count++;
    }
  }
  return count;
}

interface Cluster {
  urls: string[];
  names: string[];
  children: ChildProcess[];
}

async function startCluster(setup: { database: string; dir: string; cwd?: string }): Promise<Cluster> {
  const { database, dir, cwd } = setup;
  const cluster: Cluster = { urls: [], names: [], children: [] };
  for (let i = 0; i < CONDUCTORS; i++) {
    const name = `route-${i}`;
    const started = await startBenchConductor(join(dir, name), {
      db: database,
      name,
      cwd,
      // a fast heartbeat so every conductor's ring holds all three before measuring
      args: ["--name", name, "--heartbeat-interval", "1"],
    });
    cluster.urls.push(started.url);
    cluster.names.push(name);
    cluster.children.push(started.child);
  }
  return cluster;
}

/** Waits until every conductor names the same owner for every node; returns each node's owner index. */
async function ownersAgreed(cluster: Cluster, uuids: string[]): Promise<number[]> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const views = await Promise.all(
      cluster.urls.map(async (url) => {
        const listed = JSON.parse((await call(`${url}/v1/nodes?fields=uuid,conductor`)).text) as {
          nodes: { uuid: string; conductor: string | null }[];
        };
        return new Map(listed.nodes.map((n) => [n.uuid, n.conductor]));
      }),
    );
    const owners = uuids.map((uuid) => {
      const names = new Set(views.map((view) => view.get(uuid)));
      return names.size === 1 ? cluster.names.indexOf([...names][0] ?? "") : -1;
    });
    const everyOwnerOwns = cluster.names.every((_, i) => owners.includes(i));
    if (owners.every((o) => o >= 0) && everyOwnerOwns) return owners;
    if (Date.now() > deadline) throw new Error("the conductors' rings did not agree within 60 s");
    await new Promise((r) => setTimeout(r, 300));
  }
}

interface RouteCall {
  name: string;
  method: "GET" | "PUT";
  path: (uuid: string) => string;
  body?: unknown;
  expect: number;
}

const ROUTED_CALLS: RouteCall[] = [
  {
    name: "PUT management/boot_device",
    method: "PUT",
    path: (u) => `/v1/nodes/${u}/management/boot_device`,
    body: { boot_device: "pxe", persistent: false },
    expect: 204,
  },
  { name: "GET validate", method: "GET", path: (u) => `/v1/nodes/${u}/validate`, expect: 200 },
];

/**
 * Proves a call sent to a non-owner runs on the owner: a boot device set through the non-owner is read back
 * from the owner, and the non-owner's own (fake, in-memory) management never saw it.
 */
async function checkForwarding(cluster: Cluster, uuid: string, owner: number): Promise<void> {
  const other = (owner + 1) % CONDUCTORS;
  const put = await call(`${cluster.urls[other]}/v1/nodes/${uuid}/management/boot_device`, {
    method: "PUT",
    body: { boot_device: "disk", persistent: true },
  });
  if (put.status !== 204) throw new Error(`forwarded PUT boot_device: ${put.status} ${put.text}`);
  const read = (url: string, headers?: Record<string, string>) =>
    call(`${url}/v1/nodes/${uuid}/management/boot_device`, { headers }).then(
      (r) => JSON.parse(r.text) as { boot_device: string | null },
    );
  const atOwner = await read(cluster.urls[owner]!);
  // the header makes the non-owner answer itself instead of forwarding the GET
  const atOther = await read(cluster.urls[other]!, { "x-anvil-forwarded-by": "routing-bench" });
  if (atOwner.boot_device !== "disk" || atOther.boot_device === "disk") {
    throw new Error(
      `forwarding not observed: owner ${atOwner.boot_device}, non-owner ${atOther.boot_device}`,
    );
  }
}

interface CallFigures {
  call: string;
  concurrency: number;
  direct: Figures;
  forwarded: Figures;
  newSockets: number;
}

/** A running cluster with its nodes and their owners. */
interface Deployment {
  cluster: Cluster;
  nodes: { uuid: string; owner: number }[];
}

/**
 * Measures every routed call direct and forwarded on each deployment, all series alternating in the same
 * rounds (so a baseline and this checkout see the same neighbours' load); figures per deployment.
 */
async function measureCalls(deployments: Deployment[]): Promise<CallFigures[][]> {
  const results: CallFigures[][] = deployments.map(() => []);
  for (const routed of ROUTED_CALLS) {
    for (const concurrency of [1, 8]) {
      const send =
        ({ cluster, nodes }: Deployment, route: "direct" | "forwarded") =>
        async (i: number) => {
          const node = nodes[i % nodes.length]!;
          const at = route === "direct" ? node.owner : (node.owner + 1 + (i % 2)) % CONDUCTORS;
          const r = await call(`${cluster.urls[at]}${routed.path(node.uuid)}`, {
            method: routed.method,
            body: routed.body,
          });
          if (r.status !== routed.expect) throw new Error(`${routed.name}: ${r.status} ${r.text}`);
        };
      const ports = deployments.map((d) => new Set(d.cluster.urls.map((u) => Number(new URL(u).port))));
      const newSockets = deployments.map(() => 0);
      let before = 0;
      const figures = await alternating(
        concurrency,
        deployments.flatMap((d) => [send(d, "direct"), send(d, "forwarded")]),
        (index, phase) => {
          if (index % 2 === 0) return; // only the forwarded series
          const d = (index - 1) / 2;
          if (phase === "before") before = socketsTo(ports[d]!);
          else newSockets[d]! += Math.max(0, socketsTo(ports[d]!) - before);
        },
      );
      for (const [d, list] of results.entries()) {
        list.push({
          call: routed.name,
          concurrency,
          direct: figures[2 * d]!,
          forwarded: figures[2 * d + 1]!,
          newSockets: newSockets[d]!,
        });
      }
    }
  }
  return results;
}

/** What a forwarded request carries (method, URL, the client's headers, body), as a NOTIFY would have to. */
function typicalForwardedRequest(uuid: string): string {
  return JSON.stringify({
    method: "PUT",
    url: `/v1/nodes/${uuid}/states/power`,
    headers: {
      accept: "application/json",
      "content-type": "application/json",
      "user-agent": "python-ironicclient keystoneauth1/5.1.2 python-requests/2.28.1 CPython/3.11.2",
      "x-openstack-ironic-api-version": "1.78",
      // a Keystone Fernet token is ~180 characters
      "x-auth-token": "gAAAAA".padEnd(183, "x"),
      "x-anvil-forwarded-by": "route-1/3fa2b9c1",
    },
    body: { target: "power on" },
  });
}

/**
 * The LISTEN/NOTIFY prototype: a requester NOTIFYs `anvil_route_req` with an id and the request; a responder
 * LISTENing there parses it and NOTIFYs `anvil_route_reply` with the id and a reply; the requester, LISTENing
 * on the reply channel, matches the id. NOTIFY has no reply of its own, so the ids and the waiting are ours.
 * Sends go through pools (a LISTENing connection stays free to receive), as a conductor would have to.
 */
async function notifyRoundTrips(
  database: string,
  payloads: { request: string; reply: string },
): Promise<{ concurrency: number; figures: Figures; payloadLimit?: string }[]> {
  const requester = new pg.Client({ connectionString: database });
  const responder = new pg.Client({ connectionString: database });
  const requestSend = new pg.Pool({ connectionString: database, max: 8 });
  const replySend = new pg.Pool({ connectionString: database, max: 8 });
  const waiting = new Map<number, () => void>();
  try {
    await Promise.all([requester.connect(), responder.connect()]);
    responder.on("notification", (message) => {
      const { id } = JSON.parse(message.payload ?? "{}") as { id: number };
      const reply = JSON.stringify({ id, reply: payloads.reply });
      void replySend.query("SELECT pg_notify('anvil_route_reply', $1)", [reply]);
    });
    requester.on("notification", (message) => {
      const { id } = JSON.parse(message.payload ?? "{}") as { id: number };
      waiting.get(id)?.();
      waiting.delete(id);
    });
    await responder.query("LISTEN anvil_route_req");
    await requester.query("LISTEN anvil_route_reply");
    let nextId = 0;
    const roundTrip = async () => {
      const id = nextId++;
      const answered = new Promise<void>((resolve) => waiting.set(id, resolve));
      const message = JSON.stringify({ id, request: payloads.request });
      await requestSend.query("SELECT pg_notify('anvil_route_req', $1)", [message]);
      await answered;
    };
    const results: { concurrency: number; figures: Figures; payloadLimit?: string }[] = [];
    for (const concurrency of [1, 8]) {
      const [figures] = await alternating(concurrency, [roundTrip]);
      results.push({ concurrency, figures: figures! });
    }
    // the payload limit, on a channel nobody listens to: what a forwarded request would have to fit in
    const outcome = (bytes: number) =>
      requestSend.query("SELECT pg_notify('anvil_route_limit', $1)", ["x".repeat(bytes)]).then(
        () => `${bytes} B accepted`,
        (error: unknown) =>
          `${bytes} B refused ("${error instanceof Error ? error.message : String(error)}")`,
      );
    results[0]!.payloadLimit = `${await outcome(7_999)}, ${await outcome(8_000)}`;
    return results;
  } finally {
    await Promise.all([requester.end(), responder.end(), requestSend.end(), replySend.end()]);
  }
}

const ms = (n: number) => `${n.toFixed(2)} ms`;
const line = (name: string, f: Figures) =>
  `${name.padEnd(12)} p50 ${ms(f.p50).padStart(9)}  p99 ${ms(f.p99).padStart(9)}  ${f.perS.toFixed(0).padStart(5)}/s`;

const hopOf = (c: CallFigures) => c.forwarded.p50 - c.direct.p50;

function reportCalls(label: string, calls: CallFigures[]): void {
  console.log(`\n== ${label}: ${CONDUCTORS} conductors on one PostgreSQL, ${NODES} fake-hardware nodes ==`);
  for (const c of calls) {
    console.log(`\n${c.call}, concurrency ${c.concurrency}`);
    console.log(line("  direct", c.direct));
    console.log(line("  forwarded", c.forwarded));
    console.log(
      `  forwarded/direct: p50 ×${(c.forwarded.p50 / c.direct.p50).toFixed(2)}, p99 ×${(c.forwarded.p99 / c.direct.p99).toFixed(2)}, rate ×${(c.forwarded.perS / c.direct.perS).toFixed(2)}; HTTP hop (p50 difference) ${ms(hopOf(c))}`,
    );
    console.log(
      `  TCP connections the conductors opened to each other during the forwarded runs: ${c.newSockets}`,
    );
  }
}

function reportBeforeAfter(before: CallFigures[], after: CallFigures[]): void {
  console.log(`\n== before (${BASELINE_REV}) → after (this checkout), same run ==`);
  for (const [i, a] of after.entries()) {
    const b = before[i]!;
    console.log(
      `${`${a.call}, c=${a.concurrency}`.padEnd(34)} forwarded/direct p50 ×${(b.forwarded.p50 / b.direct.p50).toFixed(2)} → ×${(a.forwarded.p50 / a.direct.p50).toFixed(2)}; hop ${ms(hopOf(b))} → ${ms(hopOf(a))}; forwarded rate ${b.forwarded.perS.toFixed(0)}/s → ${a.forwarded.perS.toFixed(0)}/s`,
    );
  }
}

function reportNotify(
  calls: CallFigures[],
  notify: { concurrency: number; figures: Figures; payloadLimit?: string }[],
  sizes: { request: number; reply: number },
): void {
  console.log(
    `\nLISTEN/NOTIFY round trip (request ${sizes.request} B, reply ${sizes.reply} B; transport only, no API work):`,
  );
  console.log(`  payload limit: ${notify[0]?.payloadLimit ?? "not checked"}`);
  for (const n of notify) {
    console.log(line(`  conc. ${n.concurrency}`, n.figures));
    for (const c of calls.filter((x) => x.concurrency === n.concurrency)) {
      console.log(
        `    vs the HTTP hop of ${c.call}: NOTIFY p50 / hop p50 = ×${(n.figures.p50 / hopOf(c)).toFixed(2)} (${ms(n.figures.p50)} vs ${ms(hopOf(c))})`,
      );
    }
  }
}

async function freshDatabase(url: string, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return url.replace(/\/anvil$/, `/${name}`);
}

/** The revision's conductor, extracted beside this checkout's node_modules. */
function checkoutOf(revision: string, dir: string): string {
  // the whole tree (~3 MB): the conductor's imports reach beyond conductor/
  execFileSync("git", ["archive", "--output", join(dir, "revision.tar"), revision]);
  execFileSync("tar", ["-x", "-C", dir, "-f", join(dir, "revision.tar")]);
  symlinkSync(realpathSync("node_modules"), join(dir, "node_modules"));
  return dir;
}

/** Starts a cluster from `cwd` (this checkout when absent) on its own database, with its nodes spread by the ring. */
async function deploy(
  setup: { database: string; dir: string; cwd?: string },
  running: Cluster[],
): Promise<Deployment> {
  const cluster = await startCluster(setup);
  running.push(cluster);
  const uuids: string[] = [];
  for (let i = 0; i < NODES; i++) {
    const created = await call(`${cluster.urls[0]}/v1/nodes`, {
      method: "POST",
      body: { driver: "fake-hardware", name: `route-${i}` },
    });
    if (created.status !== 201) throw new Error(`create: ${created.status} ${created.text}`);
    uuids.push((JSON.parse(created.text) as { uuid: string }).uuid);
  }
  const owners = await ownersAgreed(cluster, uuids);
  const nodes = uuids.map((uuid, i) => ({ uuid, owner: owners[i]! }));
  console.log(
    `ring shares: ${cluster.names.map((n, i) => `${n}=${owners.filter((o) => o === i).length}`).join(" ")}`,
  );
  await checkForwarding(cluster, nodes[0]!.uuid, nodes[0]!.owner);
  return { cluster, nodes };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "anvil-routing-bench-"));
  // its own temp dir: the server runs as another user, who cannot enter the bench's private one
  const postgres = throwawayPostgres("anvil-routing-bench-pg-");
  const running: Cluster[] = [];
  try {
    const server = postgres.start();
    const deployments: Deployment[] = [];
    if (BASELINE_REV) {
      const cwd = checkoutOf(BASELINE_REV, mkdtempSync(join(dir, "baseline-")));
      const database = await freshDatabase(server, "routing_baseline");
      deployments.push(await deploy({ database, dir: join(dir, "baseline-data"), cwd }, running));
    }
    const database = await freshDatabase(server, "routing");
    const current = await deploy({ database, dir: join(dir, "data") }, running);
    deployments.push(current);

    const measured = await measureCalls(deployments);
    const calls = measured.at(-1)!;
    if (BASELINE_REV) reportCalls(`baseline ${BASELINE_REV}`, measured[0]!);
    reportCalls("this checkout", calls);
    if (BASELINE_REV) reportBeforeAfter(measured[0]!, calls);

    const { uuid, owner } = current.nodes[0]!;
    const validate = (await call(`${current.cluster.urls[owner]}/v1/nodes/${uuid}/validate`)).text;
    const payloads = {
      request: typicalForwardedRequest(uuid),
      reply: JSON.stringify({ status: 200, headers: { "content-type": "application/json" }, body: validate }),
    };
    const notify = await notifyRoundTrips(database, payloads);
    reportNotify(calls, notify, {
      request: Buffer.byteLength(payloads.request),
      reply: Buffer.byteLength(payloads.reply),
    });
  } finally {
    for (const child of running.flatMap((c) => c.children)) child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 500));
    await client.close();
    postgres.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
