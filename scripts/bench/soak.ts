/**
 * Soak: a conductor child process under the loads issue 11 names, for a minute:
 *  - 2,000 agent sockets holding authenticated sessions (fast track: one enrolled node and port each), heartbeating;
 *  - 500 event subscribers that send their request and never read (beyond events.maxSubscribers they get 503);
 *  - a stream of distinct list queries (GET /v1/nodes with varying limit, sort and filters) and node PATCHes
 *    (each publishes an event to every subscriber).
 * Samples the child's RSS (/proc/PID/status) every second and the API's latency throughout; prints peak and idle
 * RSS, p50/p99 latency and errors. Exits 1 if the API stopped answering (no answer for 10 s, or a 5xx), or if
 * the peak RSS passes the documented bound (--rss-bound-mib, default 512).
 * Usage: flock /tmp/anvil-heavy.lock node --import tsx scripts/bench/soak.ts [--agents 2000] [--subscribers 500] [--seconds 60]
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { Agent, request } from "node:http";
import { connect } from "node:net";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { WebSocket } from "ws";
import { encodeFrame, parseFrame } from "../../shared/protocol.ts";
import { percentile } from "./percentile.ts";
import { rssMiB, statusMiB } from "./rss.ts";
import { fleetMac } from "./fleet-ids.ts";

const ROOT = resolve(import.meta.dirname, "../..");
const { values } = parseArgs({
  options: {
    agents: { type: "string", default: "2000" },
    subscribers: { type: "string", default: "500" },
    seconds: { type: "string", default: "60" },
    "rss-bound-mib": { type: "string", default: "512" },
  },
});
const AGENTS = Number(values.agents);
const SUBSCRIBERS = Number(values.subscribers);
const SECONDS = Number(values.seconds);
const RSS_BOUND_MIB = Number(values["rss-bound-mib"]);
const FDS_NEEDED = AGENTS + SUBSCRIBERS + 1024;

const http = new Agent({ keepAlive: true, maxSockets: 8 });

function call(
  url: string,
  init: { method?: string; body?: unknown; timeoutMs?: number } = {},
): Promise<{ status: number; text: string }> {
  return new Promise((done, fail) => {
    const payload = init.body === undefined ? undefined : JSON.stringify(init.body);
    const req = request(url, {
      method: init.method ?? "GET",
      agent: http,
      timeout: init.timeoutMs ?? 10_000,
      headers: {
        "Content-Type": "application/json",
        "X-OpenStack-Ironic-API-Version": "1.78",
        ...(payload ? { "Content-Length": Buffer.byteLength(payload) } : {}),
      },
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => done({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
    });
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", fail);
    req.end(payload);
  });
}

function openFilesLimit(): number {
  const limits = readFileSync("/proc/self/limits", "utf8");
  return Number(/Max open files\s+(\d+)/.exec(limits)?.[1] ?? 1024);
}

/** The conductor as its own process, its fd limit raised by the shell if it is too low for the run. */
async function startConductor(dir: string): Promise<{ child: ChildProcess; url: string }> {
  const argv = [
    process.execPath,
    "--import",
    "tsx",
    "conductor/main.ts",
    "--port",
    "0",
    "--db",
    join(dir, "anvil.sqlite"),
    "--data-dir",
    dir,
    "--power-sync-interval",
    "0",
    "--fast-track",
    // one source (loopback) holds the whole fleet here
    "--agent-max-connections",
    String(AGENTS + 64),
    "--agent-max-connections-per-source",
    String(AGENTS + 64),
  ];
  const quoted = argv.map((arg) => `'${arg.replaceAll("'", "'\\''")}'`).join(" ");
  const child = spawn("sh", ["-c", `ulimit -n ${FDS_NEEDED} 2>/dev/null; exec ${quoted}`], {
    cwd: ROOT,
    stdio: ["ignore", "ignore", "pipe"],
  });
  const url = await new Promise<string>((done, fail) => {
    const lines = createInterface({ input: child.stderr! });
    lines.on("line", (line) => {
      const match = /"url":"(http:\/\/[^"]+)"/.exec(line);
      if (match?.[1]) done(match[1]);
    });
    child.on("exit", (code) => fail(new Error(`conductor exited with ${code}`)));
  });
  return { child, url };
}

/** Enrolls `count` fake-hardware nodes, each with one port, eight requests at a time. */
async function enroll(url: string, count: number): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      const node = await call(`${url}/v1/nodes`, {
        method: "POST",
        body: { name: `soak-${i}`, driver: "fake-hardware" },
      });
      if (node.status !== 201) throw new Error(`node create: ${node.status} ${node.text}`);
      const uuid = (JSON.parse(node.text) as { uuid: string }).uuid;
      const port = await call(`${url}/v1/ports`, {
        method: "POST",
        body: { node_uuid: uuid, address: fleetMac(i, "52:54:01") },
      });
      if (port.status !== 201) throw new Error(`port create: ${port.status} ${port.text}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}

/** One agent session: hello with its MAC, then heartbeats at the interval the welcome asks for. */
function holdAgent(wsUrl: string, index: number, stats: { welcomed: number; dropped: number }): WebSocket {
  const socket = new WebSocket(wsUrl);
  let timer: NodeJS.Timeout | undefined;
  socket.on("open", () =>
    socket.send(
      encodeFrame({
        type: "hello",
        agent_version: "soak",
        macs: [fleetMac(index, "52:54:01")],
        bmc_address: null,
        boot_id: `soak-boot-${index}`,
      }),
    ),
  );
  socket.on("message", (data) => {
    const parsed = parseFrame(data.toString(), 1024 * 1024);
    if (!parsed.ok || parsed.frame.type !== "welcome") return;
    stats.welcomed += 1;
    const every = parsed.frame.heartbeat_interval_ms;
    timer = setInterval(() => socket.send(encodeFrame({ type: "heartbeat", ts: Date.now() })), every);
  });
  socket.on("error", () => undefined);
  socket.on("close", () => {
    clearInterval(timer);
    stats.dropped += 1;
  });
  return socket;
}

/** A subscriber that reads the status line and then nothing more, ever. */
async function stalledSubscriber(port: number): Promise<{ socket: Socket; status: number }> {
  const socket = connect(port, "127.0.0.1");
  socket.on("error", () => undefined);
  await once(socket, "connect");
  socket.write("GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  const [first] = (await once(socket, "data")) as [Buffer];
  socket.pause();
  return { socket, status: Number(/^HTTP\/1\.1 (\d{3})/.exec(first.toString("latin1"))?.[1] ?? 0) };
}

/** Distinct list queries: every one a new combination of limit, sort and filters. */
function listQuery(i: number): string {
  const keys = ["created_at", "name", "uuid", "provision_state", "updated_at"];
  const params = new URLSearchParams({
    limit: String(1 + (i % 997)),
    sort_key: keys[i % keys.length] as string,
    sort_dir: i % 2 === 0 ? "asc" : "desc",
  });
  if (i % 3 === 0) params.set("maintenance", i % 6 === 0 ? "true" : "false");
  if (i % 5 === 0) params.set("provision_state", "enroll");
  if (i % 7 === 0) params.set("driver", "fake-hardware");
  if (i % 11 === 0) params.set("fields", "uuid,name,provision_state");
  return `/v1/nodes?${params.toString()}`;
}

async function main(): Promise<void> {
  if (openFilesLimit() < FDS_NEEDED) {
    throw new Error(`open files limit ${openFilesLimit()} < ${FDS_NEEDED}: run with ulimit -n ${FDS_NEEDED}`);
  }
  const dir = mkdtempSync(join(tmpdir(), "anvil-soak-"));
  const { child, url } = await startConductor(dir);
  const pid = child.pid as number;
  const port = Number(new URL(url).port);
  try {
    const startRss = rssMiB(pid);
    const enrollStart = Date.now();
    await enroll(url, AGENTS);
    const enrollS = (Date.now() - enrollStart) / 1000;
    const idleRss = rssMiB(pid);

    const agentStats = { welcomed: 0, dropped: 0 };
    const wsUrl = `${url.replace(/^http/, "ws")}/v1/agent`;
    const agents: WebSocket[] = [];
    for (let i = 0; i < AGENTS; i++) {
      agents.push(holdAgent(wsUrl, i, agentStats));
      if (i % 100 === 99) await new Promise((done) => setTimeout(done, 50));
    }
    const rampDeadline = Date.now() + 60_000;
    while (agentStats.welcomed < AGENTS && Date.now() < rampDeadline)
      await new Promise((done) => setTimeout(done, 100));

    const subscribers = await Promise.all(Array.from({ length: SUBSCRIBERS }, () => stalledSubscriber(port)));
    const subscribed = subscribers.filter((s) => s.status === 200).length;
    const capped = subscribers.filter((s) => s.status === 503).length;

    const latencies: number[] = [];
    const errors: string[] = [];
    let lastAnswer = Date.now();
    let stalledApi = false;
    let peakRss = rssMiB(pid);
    const rssSamples: number[] = [];
    const endAt = Date.now() + SECONDS * 1000;
    let queries = 0;
    let patches = 0;

    const sampler = setInterval(() => {
      const rss = rssMiB(pid);
      rssSamples.push(rss);
      peakRss = Math.max(peakRss, rss);
      if (Date.now() - lastAnswer > 10_000) stalledApi = true;
    }, 1000);

    const lister = async (): Promise<void> => {
      while (Date.now() < endAt) {
        const i = queries++;
        const started = performance.now();
        try {
          const answer = await call(`${url}${listQuery(i)}`);
          latencies.push(performance.now() - started);
          lastAnswer = Date.now();
          if (answer.status !== 200) errors.push(`GET ${answer.status}`);
        } catch (error) {
          errors.push(`GET ${(error as Error).message}`);
        }
      }
    };
    const patcher = async (): Promise<void> => {
      while (Date.now() < endAt) {
        const i = patches++;
        try {
          const answer = await call(`${url}/v1/nodes/soak-${i % AGENTS}`, {
            method: "PATCH",
            body: [{ op: "add", path: "/extra/soak", value: i }],
          });
          if (answer.status !== 200) errors.push(`PATCH ${answer.status}`);
        } catch (error) {
          errors.push(`PATCH ${(error as Error).message}`);
        }
      }
    };
    await Promise.all([lister(), lister(), lister(), patcher()]);
    clearInterval(sampler);

    const finalProbe = await call(`${url}/v1`).catch(() => ({ status: 0, text: "" }));
    const sorted = [...latencies].sort((a, b) => a - b);
    const hwm = statusMiB(pid, "VmHWM");
    const serverErrors = errors.filter((e) => /\b5\d\d\b/.test(e)).length;
    const report = {
      agents: AGENTS,
      agents_welcomed: agentStats.welcomed,
      agents_dropped_during_run: agentStats.dropped,
      subscribers_tried: SUBSCRIBERS,
      subscribers_accepted: subscribed,
      subscribers_refused_503: capped,
      enroll_s: +enrollS.toFixed(1),
      window_s: SECONDS,
      list_queries: queries,
      patches,
      latency_p50_ms: +percentile(sorted, 50).toFixed(1),
      latency_p99_ms: +percentile(sorted, 99).toFixed(1),
      latency_max_ms: +(sorted.at(-1) ?? NaN).toFixed(1),
      errors: errors.length,
      errors_sample: [...new Set(errors)].slice(0, 5),
      rss_start_mib: +startRss.toFixed(1),
      rss_after_enroll_mib: +idleRss.toFixed(1),
      rss_first_sample_mib: +(rssSamples[0] ?? NaN).toFixed(1),
      rss_last_sample_mib: +(rssSamples.at(-1) ?? NaN).toFixed(1),
      rss_peak_mib: +peakRss.toFixed(1),
      rss_hwm_mib: +hwm.toFixed(1),
      rss_bound_mib: RSS_BOUND_MIB,
      api_answered_throughout: !stalledApi && finalProbe.status === 200,
    };
    process.stdout.write(JSON.stringify(report, null, 2) + "\n");
    for (const agent of agents) agent.terminate();
    for (const subscriber of subscribers) subscriber.socket.destroy();
    if (!report.api_answered_throughout || serverErrors > 0) {
      process.stderr.write("soak: the API stopped answering (or answered 5xx)\n");
      process.exitCode = 1;
    } else if (hwm > RSS_BOUND_MIB) {
      process.stderr.write(`soak: peak RSS ${hwm.toFixed(0)} MiB is over the bound ${RSS_BOUND_MIB} MiB\n`);
      process.exitCode = 1;
    }
  } finally {
    child.kill("SIGKILL");
    http.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`soak failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
