// API benchmark: 10,000 nodes created through the API (concurrency 8), then list/detail/show latencies and the
// conductor's RSS, printed beside real Ironic 21.4 measured on this machine kind (shared/reference/ironic-bench.md).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, request } from "node:http";
import { startBenchConductor } from "./conductor-process.ts";
import { percentile } from "./percentile.ts";
import { rssMiB } from "./rss.ts";

const NODES = Number(process.env.BENCH_NODES ?? 10_000);
const CONCURRENCY = 8;
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 30);

const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });

function call(url: string, method: string, body?: unknown): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(url, {
      method,
      agent,
      headers: {
        "Content-Type": "application/json",
        "X-OpenStack-Ironic-API-Version": "1.78",
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
}

async function timed(
  samples: number,
  fn: () => Promise<void>,
): Promise<{ p50: number; p99: number; rps: number }> {
  const times: number[] = [];
  const started = performance.now();
  for (let i = 0; i < samples; i++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  const total = (performance.now() - started) / 1000;
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99), rps: samples / total };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "anvil-bench-"));
  const { child, url } = await startBenchConductor(dir);
  try {
    let next = 0;
    let failed = 0;
    const createStart = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < NODES) {
          const i = next++;
          const res = await call(`${url}/v1/nodes`, "POST", {
            name: `bench-${i}`,
            driver: "fake-hardware",
            resource_class: i % 5 ? "small" : "large",
            properties: { cpus: 8, memory_mb: 16384, local_gb: 200, cpu_arch: "x86_64" },
            driver_info: { ipmi_address: `10.0.${i >> 8}.${i & 255}`, ipmi_password: "secret" },
          });
          if (res.status !== 201) failed++;
        }
      }),
    );
    const createRate = NODES / ((performance.now() - createStart) / 1000);
    const list = await timed(SAMPLES, async () => {
      const res = await call(`${url}/v1/nodes?limit=1000`, "GET");
      if (res.status !== 200 || (JSON.parse(res.text) as { nodes: unknown[] }).nodes.length !== 1000)
        throw new Error("bad list");
    });
    const detail = await timed(SAMPLES, async () => {
      const res = await call(`${url}/v1/nodes/detail?limit=1000`, "GET");
      if (res.status !== 200) throw new Error("bad detail");
    });
    const one = await timed(Math.max(SAMPLES, 200), async () => {
      const res = await call(`${url}/v1/nodes/bench-${Math.floor(Math.random() * NODES)}`, "GET");
      if (res.status !== 200) throw new Error("bad show");
    });
    const rss = rssMiB(child.pid ?? 0);
    const row = (...[name, ours, ironic, ratio]: [string, string, string, string]) =>
      console.log(`${name.padEnd(40)} ${ours.padStart(16)} ${ironic.padStart(16)} ${ratio.padStart(10)}`);
    console.log(
      `Anvil conductor API at ${NODES} nodes (SQLite, fake-hardware), concurrency ${CONCURRENCY}, ${SAMPLES}+ samples`,
    );
    row("measurement", "Anvil", "Ironic 21.4", "ratio");
    row("POST /v1/nodes", `${createRate.toFixed(0)}/s`, "38-57/s", `${(createRate / 57).toFixed(1)}x`);
    row(
      "GET /v1/nodes?limit=1000 p50 / p99",
      `${list.p50.toFixed(1)} / ${list.p99.toFixed(1)} ms`,
      "471 ms (median)",
      `${(471 / list.p50).toFixed(0)}x`,
    );
    row(
      "GET /v1/nodes/detail?limit=1000 p50/p99",
      `${detail.p50.toFixed(1)} / ${detail.p99.toFixed(1)} ms`,
      "1110 ms (median)",
      `${(1110 / detail.p50).toFixed(0)}x`,
    );
    row("GET /v1/nodes/{id} p50 / p99", `${one.p50.toFixed(2)} / ${one.p99.toFixed(2)} ms`, "-", "-");
    row("GET /v1/nodes/{id} req/s (1 client)", `${one.rps.toFixed(0)}/s`, "-", "-");
    row("conductor RSS", `${rss.toFixed(0)} MiB`, "~490 MiB", `${(490 / rss).toFixed(1)}x`);
    console.log(`failed creates: ${failed}`);
    const goals = [
      ["create >= 2,000/s", createRate >= 2000],
      ["list p99 < 20 ms", list.p99 < 20],
      ["detail p99 < 60 ms", detail.p99 < 60],
      ["single GET p99 < 5 ms", one.p99 < 5],
      ["RSS < 200 MB", rss < 200],
    ] as const;
    for (const [goal, met] of goals) console.log(`goal ${goal}: ${met ? "met" : "NOT met"}`);
  } finally {
    child.kill("SIGTERM");
    agent.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
