/**
 * The dashboard at fleet scale: first paint and first table render with 10^4 nodes, how long a change
 * takes to show in the table while 100 events/s stream in, and what the event stream costs the conductor
 * with 100 dashboards open (CPU beside the same load with none open, measured in the same run).
 *   node --import tsx scripts/bench/dashboard.ts [--nodes 10000] [--rate 100] [--seconds 10] [--dashboards 100]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { chromium } from "playwright-core";
import { defaultConfig } from "../../conductor/config.ts";
import { createConductor } from "../../conductor/server.ts";
import { silentLogger } from "../../shared/log.ts";

const { values } = parseArgs({
  options: {
    nodes: { type: "string", default: "10000" },
    rate: { type: "string", default: "100" },
    seconds: { type: "string", default: "10" },
    dashboards: { type: "string", default: "100" },
  },
});
const NODES = Number(values.nodes);
const RATE = Number(values.rate);
const SECONDS = Number(values.seconds);
const DASHBOARDS = Number(values.dashboards);

const dir = mkdtempSync(join(tmpdir(), "anvil-bench-ui-"));
const config = defaultConfig({
  port: 0,
  dataDir: dir,
  databasePath: join(dir, "anvil.sqlite"),
  powerSync: { intervalS: 0 },
  stopGraceS: 0,
  events: { maxSubscribers: DASHBOARDS + 10 },
});
const conductor = createConductor(config, { logger: silentLogger });
const url = await conductor.start();

// the fleet, created through the API as an operator would
const post = (body: unknown) =>
  fetch(`${url}/v1/nodes`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-OpenStack-Ironic-API-Version": "latest" },
    body: JSON.stringify(body),
  });
for (let i = 0; i < NODES; i += 200)
  await Promise.all(
    Array.from({ length: Math.min(200, NODES - i) }, (_, j) =>
      post({ name: `n${String(i + j).padStart(6, "0")}`, driver: "fake-hardware", resource_class: "bench" }),
    ),
  );
const page100 = (await (
  await fetch(`${url}/v1/nodes?limit=100&sort_key=name&sort_dir=asc`, {
    headers: { "X-OpenStack-Ironic-API-Version": "latest" },
  })
).json()) as { nodes: { uuid: string }[] };
const shownUuids = page100.nodes.map((n) => n.uuid);

/** Publishes `RATE` provision events a second for `SECONDS`, cycling through nodes on the first page. */
async function eventLoad(onPublish?: (uuid: string, state: string, at: number) => void): Promise<number> {
  const states = ["manageable", "cleaning", "available", "deploying", "active"];
  let sent = 0;
  const started = Date.now();
  while (Date.now() - started < SECONDS * 1000) {
    const uuid = shownUuids[sent % shownUuids.length]!;
    // each round over the page moves every node to its next state, so every event changes a cell
    const state = states[Math.floor(sent / shownUuids.length) % states.length]!;
    const at = Date.now();
    conductor.events.publish({ type: "provision", node: uuid, provision_state: state, event: "bench" });
    onPublish?.(uuid, state, at);
    sent++;
    const due = started + (sent * 1000) / RATE;
    await new Promise((r) => setTimeout(r, Math.max(0, due - Date.now())));
  }
  return sent;
}

const browser = await chromium.launch({
  executablePath: process.env.ANVIL_CHROMIUM ?? "/usr/bin/chromium",
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-sync",
  ],
});
const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
const opened = Date.now();
await page.goto(`${url}/ui/`);
await page.waitForSelector('[data-testid="fleet"] tbody tr');
const tableMs = Date.now() - opened;
const paint = (await page.evaluate(
  "performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null",
)) as number | null;

// table update latency: the page notes when a row's state cell changes; we note when we published it
await page.evaluate(`
  window.benchSeen = [];
  new MutationObserver((records) => {
    for (const r of records) {
      const cell = r.target.nodeType === 3 ? r.target.parentElement : r.target;
      const row = cell && cell.closest && cell.closest("tr");
      if (row && cell.classList && cell.classList.contains("state")) window.benchSeen.push([row.dataset.node, cell.textContent, Date.now()]);
    }
  }).observe(document.querySelector('[data-testid="fleet"] tbody'), { subtree: true, characterData: true, childList: true });
`);
const published: { uuid: string; state: string; at: number }[] = [];
const sent = await eventLoad((uuid, state, at) => published.push({ uuid, state, at }));
await new Promise((r) => setTimeout(r, 500));
const seen = (await page.evaluate("window.benchSeen")) as [string, string, number][];
const nameOf = new Map(page100.nodes.map((n, i) => [n.uuid, `n${String(i).padStart(6, "0")}`]));
const latencies: number[] = [];
for (const p of published) {
  const hit = seen.find((s) => s[0] === nameOf.get(p.uuid) && s[1] === p.state && s[2] >= p.at);
  if (hit) latencies.push(hit[2] - p.at);
}
latencies.sort((a, b) => a - b);
const pct = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
await browser.close();

/** Conductor CPU (user+system ms) while publishing the load, with `n` raw event-stream clients reading. */
async function streamCost(n: number): Promise<{ cpuMs: number; bytes: number }> {
  let bytes = 0;
  const clients = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<() => void>((resolve) => {
          const req = request(`${url}/v1/events`, (res) => {
            res.on("data", (chunk: Buffer) => (bytes += chunk.length));
            resolve(() => req.destroy());
          });
          req.end();
        }),
    ),
  );
  const before = process.cpuUsage();
  await eventLoad();
  const used = process.cpuUsage(before);
  for (const close of clients) close();
  return { cpuMs: (used.user + used.system) / 1000, bytes };
}
const idle = await streamCost(0);
const busy = await streamCost(DASHBOARDS);

await conductor.stop();
rmSync(dir, { recursive: true, force: true });

const fmt = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : "n/a");
console.log(
  `dashboard with ${NODES} nodes, ${RATE} events/s for ${SECONDS} s (headless Chromium, this machine)`,
);
console.log(`  first contentful paint        ${paint === null ? "n/a" : `${paint.toFixed(0)} ms`}`);
console.log(`  first table rendered          ${tableMs} ms after navigation`);
console.log(
  `  table update after an event   p50 ${fmt(pct(0.5))} ms, p99 ${fmt(pct(0.99))} ms (${latencies.length} of ${sent} changes seen)`,
);
console.log(
  `  event stream, ${DASHBOARDS} dashboards   conductor CPU ${idle.cpuMs.toFixed(0)} ms without them, ${busy.cpuMs.toFixed(0)} ms with them over ${SECONDS} s: +${(((busy.cpuMs - idle.cpuMs) / (SECONDS * 1000)) * 100).toFixed(1)} % of one core, ${(busy.bytes / 1024 / 1024).toFixed(1)} MiB sent`,
);
