import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureAgentBuilt, type AgentProcess } from "../helpers/agent.ts";
import { launchBrowser } from "../helpers/browser.ts";
import { api, provisionThrough, released, startConductor, waitForState } from "../helpers/conductor.ts";
import { enrollSimulatedNode } from "../helpers/simulated-node.ts";

const MiB = 1024 * 1024;
/** Set ANVIL_SCREENSHOTS=DIR to keep the pages as PNGs (docs/ has the ones taken this way). */
const SHOTS = process.env.ANVIL_SCREENSHOTS;

/**
 * An image server that trickles its body (4 MiB/s) so a deploy lasts long enough to watch it move. It serves
 * byte ranges as object stores do (a swarm deploy fetches its chunks by range).
 */
async function slowImageServer(image: Buffer): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((request, response) => {
    const range = /^bytes=(\d+)-(\d*)$/.exec(request.headers.range ?? "");
    const first = range ? Number(range[1]) : 0;
    const end = range?.[2] ? Math.min(Number(range[2]) + 1, image.length) : image.length;
    const body = image.subarray(first, end);
    response.writeHead(range ? 206 : 200, {
      "Content-Length": body.length,
      "Content-Type": "application/octet-stream",
      "Accept-Ranges": "bytes",
      ...(range ? { "Content-Range": `bytes ${first}-${end - 1}/${image.length}` } : {}),
    });
    if (request.method === "HEAD") return void response.end();
    let offset = 0;
    const timer = setInterval(() => {
      const chunk = body.subarray(offset, offset + 256 * 1024);
      offset += chunk.length;
      response.write(chunk);
      if (offset >= body.length) {
        clearInterval(timer);
        response.end();
      }
    }, 60);
    request.on("close", () => clearInterval(timer));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe("the web dashboard in headless Chromium", () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-ui-"));
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  let browser: Browser;
  let page: Page;
  let executable = "";
  let images: Awaited<ReturnType<typeof slowImageServer>>;
  const image = randomBytes(16 * MiB);
  const agents: AgentProcess[] = [];

  beforeAll(async () => {
    executable = await ensureAgentBuilt();
    images = await slowImageServer(image);
    // Swarm deploys on: a lone node's wave takes every chunk from the store, and the page says so. Progress
    // moves a 4 MiB chunk at a time: one chunk in flight, so the 16 MiB image shows several fill levels.
    ctx = await startConductor({
      timeoutCheckIntervalS: 1000,
      deploy: { swarm: true, swarmLingerS: 0, swarmWindow: 1 },
    });
    // a fleet of 1,000 fake-hardware nodes, 10 of them manageable
    for (let batch = 0; batch < 10; batch++) {
      await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          api(`${ctx.url}/v1/nodes`, {
            method: "POST",
            body: {
              name: `fleet-${String(batch * 100 + i).padStart(4, "0")}`,
              driver: "fake-hardware",
              resource_class: i % 2 ? "large" : "small",
            },
          }).then((made) => expect(made.status, JSON.stringify(made.body)).toBe(201)),
        ),
      );
    }
    // landed, not just sent: the fleet test reads "10 manageable" once, right when "990 enroll" shows
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        provisionThrough(ctx.url, `fleet-${String(i).padStart(4, "0")}`, [["manage", "manageable"]]),
      ),
    );
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  }, 300_000);
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.stop();
  });
  afterAll(async () => {
    await browser?.close();
    await ctx?.stop();
    await images?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const rows = () => page.locator('[data-testid="fleet"] tbody tr');
  /** The page's answer to the last action, "" while there is none: polled, as it arrives after the click. */
  const shownMessage = () =>
    page
      .locator('[data-testid="message"]')
      .innerText({ timeout: 1_000 })
      .catch(() => "");

  it("renders the fleet of 1,000 nodes with counts, and filters it", async () => {
    await page.goto(`${ctx.url}/ui/`);
    await page.waitForSelector('[data-testid="fleet"] tbody tr');
    expect(await rows().count()).toBe(100);
    await page.selectOption('[data-testid="page-size"]', "1000");
    await expect.poll(() => rows().count(), { timeout: 30_000 }).toBe(1000);
    await expect.poll(() => page.locator('[data-testid="counts"]').innerText()).toContain("990 enroll");
    expect(await page.locator('[data-testid="counts"]').innerText()).toContain("10 manageable");
    // search narrows the rows shown
    await page.fill('[data-testid="search"]', "fleet-09");
    await expect.poll(() => rows().count(), { timeout: 30_000 }).toBe(100);
    await page.fill('[data-testid="search"]', "");
    // the state filter asks the API for just those nodes
    await page.selectOption('[data-testid="state-filter"]', "manageable");
    await expect.poll(() => rows().count(), { timeout: 30_000 }).toBe(10);
    const states = await page.locator('[data-testid="fleet"] tbody td.state').allInnerTexts();
    expect(new Set(states)).toEqual(new Set(["manageable"]));
    if (SHOTS) {
      await page.selectOption('[data-testid="state-filter"]', "");
      await page.selectOption('[data-testid="page-size"]', "100");
      await expect.poll(() => rows().count(), { timeout: 30_000 }).toBe(100);
      mkdirSync(SHOTS, { recursive: true });
      await page.screenshot({ path: join(SHOTS, "dashboard-fleet.png") });
    }
  }, 120_000);

  /** A simulated machine (the real agent executable, its disk a file), available, shown on its page. */
  async function availableNodePage(name: string, mac: string) {
    const node = await enrollSimulatedNode({
      url: ctx.url,
      dir,
      name,
      mac,
      executable,
      body: { automated_clean: false },
    });
    await provisionThrough(ctx.url, name, [
      ["manage", "manageable"],
      ["provide", "available"],
    ]);
    // the page's deploy needs the lock: released before the test clicks it
    await released(ctx.url, name);
    await page.goto(`${ctx.url}/ui/#/node/${node.uuid}`);
    await page.waitForSelector('[data-testid="node-state"]');
    // a marker that a reload would wipe
    await page.evaluate("window.anvilMarker = 42");
    return node;
  }

  async function deployFromPage(checksum: string): Promise<void> {
    await page.fill('[data-testid="image-url"]', `${images.url}/disk.raw`);
    await page.fill('[data-testid="image-checksum"]', checksum);
    await page.click('button[data-action="deploy"]');
    await page.click('[data-testid="confirm"]');
    await expect.poll(shownMessage, { timeout: 10_000 }).toBe("deploy: accepted");
  }

  it("deploys from the node page: the progress bar moves and the node reaches active without a reload", async () => {
    const node = await availableNodePage("sim-ui", "52:54:00:00:0a:01");
    await deployFromPage(`sha256:${createHash("sha256").update(image).digest("hex")}`);
    await waitForState(ctx.url, "sim-ui", "wait call-back");
    agents.push(node.boot());
    // the bar shows two different fill levels while the image streams in
    const seen = new Set<string>();
    await expect
      .poll(
        async () => {
          const percent = await page
            .locator('[data-testid="progress"] .bar')
            .getAttribute("data-percent", { timeout: 100 })
            .catch(() => null);
          if (percent) seen.add(percent);
          return seen.size;
        },
        { timeout: 60_000, interval: 200 },
      )
      .toBeGreaterThanOrEqual(2);
    if (SHOTS) await page.screenshot({ path: join(SHOTS, "dashboard-node-deploying.png") });
    await expect
      .poll(() => page.locator('[data-testid="node-state"]').innerText(), { timeout: 60_000 })
      .toBe("active");
    expect(await page.evaluate("window.anvilMarker")).toBe(42);
    // the last deploy's figures: the image's size, and in its (one-node) swarm every byte from the store
    const figures = page.locator('[data-testid="deploy-result"]');
    await expect.poll(() => figures.innerText().catch(() => ""), { timeout: 10_000 }).toContain("16.0 MiB");
    const text = await figures.innerText();
    expect(text).toMatch(/from the store\s+16\.0 MiB \(100 %\)/);
    expect(text).toMatch(/from peers\s+0 B \(0 %\)/);
    if (SHOTS) await page.screenshot({ path: join(SHOTS, "dashboard-node.png"), fullPage: true });
  }, 180_000);

  it("a failing deploy shows last_error on the page", async () => {
    const node = await availableNodePage("sim-bad", "52:54:00:00:0a:02");
    await deployFromPage(`sha256:${"0".repeat(64)}`);
    await waitForState(ctx.url, "sim-bad", "wait call-back");
    agents.push(node.boot());
    await expect
      .poll(() => page.locator('[data-testid="node-state"]').innerText(), { timeout: 90_000 })
      .toBe("deploy failed");
    await expect.poll(() => page.locator('[data-testid="last-error"]').innerText()).toMatch(/mismatch/i);
  }, 180_000);

  it("an action the API refuses shows the API's message in words", async () => {
    // an active node cannot be managed: Ironic's own refusal comes back to the page
    await page.click('button[data-action="manage"]');
    await page.click('[data-testid="confirm"]');
    // the answer arrives after the click: wait for it rather than read whatever is shown
    await expect.poll(shownMessage, { timeout: 10_000 }).toMatch(/^manage refused: /);
    const message = await page.locator('[data-testid="message"]').innerText();
    expect(message).toMatch(/can not be performed|not allowed|state/i);
  }, 60_000);
});
