import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basic, writeUserFiles } from "../helpers/auth.ts";
import { startConductor } from "../helpers/conductor.ts";

const dir = mkdtempSync(join(tmpdir(), "anvil-side-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const users = () =>
  writeUserFiles(dir, [
    { name: "ops", password: "ops-pass", role: "admin" },
    { name: "watcher", password: "watch-pass", role: "reader" },
  ]);

describe("metrics.listen: /metrics on its own loopback listener", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  beforeAll(async () => {
    const files = users();
    ctx = await startConductor({
      auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile },
      metrics: { listen: "127.0.0.1:0" },
    });
  });
  afterAll(() => ctx.stop());

  it("serves Prometheus text there, without credentials, and nothing else", async () => {
    const url = ctx.conductor.sideUrls.metrics ?? "";
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(url).not.toBe(ctx.url);
    const response = await fetch(`${url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await response.text()).toMatch(/^# HELP anvil_nodes /m);
    // not a second door into the API
    expect((await fetch(`${url}/v1/nodes`)).status).toBe(404);
  });

  it("the API answers 404 for /metrics, even to an administrator", async () => {
    const response = await fetch(`${ctx.url}/metrics`, { headers: basic("ops", "ops-pass") });
    expect(response.status).toBe(404);
    expect(((await response.json()) as { error_message: string }).error_message).toContain(
      "could not be found",
    );
    // the API itself still works for that user
    expect((await fetch(`${ctx.url}/v1/nodes`, { headers: basic("ops", "ops-pass") })).status).toBe(200);
  });
});

describe("without metrics.listen, /metrics stays on the API under its auth strategy", () => {
  it("401 without credentials, 200 for a system reader", async () => {
    const files = users();
    const ctx = await startConductor({
      auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile },
    });
    try {
      expect(ctx.conductor.sideUrls).toEqual({});
      expect((await fetch(`${ctx.url}/metrics`)).status).toBe(401);
      const scraped = await fetch(`${ctx.url}/metrics`, { headers: basic("watcher", "watch-pass") });
      expect(scraped.status).toBe(200);
      expect(await scraped.text()).toMatch(/^# HELP anvil_nodes /m);
    } finally {
      await ctx.stop();
    }
  });
});

describe("a metrics address that is not loopback", () => {
  /** Runs the conductor's main with these flags; resolves with its exit code and stderr. */
  const conductor = (args: string[]) =>
    new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(
        process.execPath,
        [
          "--import",
          "tsx",
          "conductor/main.ts",
          "--port",
          "0",
          "--db",
          ":memory:",
          "--data-dir",
          dir,
          ...args,
        ],
        { stdio: ["ignore", "ignore", "pipe"] },
      );
      let stderr = "";
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      // a conductor that starts would run forever: a bounded wait, then it is stopped and reported as such
      const timer = setTimeout(() => child.kill("SIGTERM"), 20_000);
      child.on("exit", (code) => {
        clearTimeout(timer);
        resolve({ code, stderr });
      });
    });

  it("is refused at start with a clear error naming the setting", async () => {
    const { code, stderr } = await conductor(["--metrics-listen", "0.0.0.0:9608"]);
    expect(code).toBe(2);
    expect(stderr).toContain("--metrics-listen");
    expect(stderr).toContain("the metrics listener has no authentication");
    expect(stderr).toContain("--metrics-allow-non-loopback");
  }, 30_000);

  it("a malformed address is refused the same way", async () => {
    const { code, stderr } = await conductor(["--metrics-listen", "9608"]);
    expect(code).toBe(2);
    expect(stderr).toContain("metrics.listen (--metrics-listen");
    expect(stderr).toContain("expected host:port");
  }, 30_000);
});

describe("boot.httpListen: boot files over plain HTTP on their own listener", () => {
  it("serves the iPXE entry script and local images, and nothing of the API", async () => {
    const images = join(dir, "images");
    const ctx = await startConductor({
      boot: { httpListen: "127.0.0.1:0" },
      images: { localRoot: images },
    });
    try {
      const url = ctx.conductor.sideUrls.boot ?? "";
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const script = await fetch(`${url}/boot/boot.ipxe`);
      expect(script.status).toBe(200);
      expect(await script.text()).toMatch(/^#!ipxe/);
      expect((await fetch(`${url}/v1/nodes`)).status).toBe(404);
      expect((await fetch(`${url}/metrics`)).status).toBe(404);
      expect((await fetch(`${url}/images/../anvil.sqlite`)).status).toBe(404);
      // local images only through the conductor's signed links, the same on this listener as on the API's
      writeFileSync(join(images, "disk.raw"), "image bytes");
      expect((await fetch(`${url}/images/disk.raw`)).status).toBe(403);
      const signed = new URL(ctx.conductor.provisioner.deps.sign(new URL(`file://${images}/disk.raw`)));
      const onBoot = await fetch(`${url}${signed.pathname}${signed.search}`);
      expect(onBoot.status).toBe(200);
      expect(await onBoot.text()).toBe("image bytes");
      expect((await fetch(signed)).status).toBe(200);
    } finally {
      await ctx.stop();
    }
  });
});
