import { execFile } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startConductor } from "../helpers/conductor.ts";

const BIN = resolve(import.meta.dirname, "../../bin/anvil");

function anvil(url: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(BIN, ["--url", url, ...args], { timeout: 60_000 }, (error, stdout, stderr) => {
      done({ code: error ? (typeof error.code === "number" ? error.code : -1) : 0, stdout, stderr });
    });
  });
}

/**
 * A real HTTP proxy in front of the conductor that answers /v1/events with 404, as a conductor without the
 * event stream (or a load balancer that drops it) would.
 */
async function proxyWithoutEvents(target: string): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    if ((req.url ?? "").startsWith("/v1/events")) {
      res.writeHead(404, { "Content-Type": "application/json" });
      res.end(
        JSON.stringify({ error_message: JSON.stringify({ faultstring: "Not found", faultcode: "Client" }) }),
      );
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const headers: Record<string, string> = {};
      for (const name of ["content-type", "x-openstack-ironic-api-version", "accept"]) {
        const value = req.headers[name];
        if (typeof value === "string") headers[name] = value;
      }
      fetch(`${target}${req.url ?? "/"}`, {
        method: req.method,
        headers,
        body: chunks.length ? Buffer.concat(chunks) : undefined,
      })
        .then(async (response) => {
          res.writeHead(response.status, {
            "Content-Type": response.headers.get("content-type") ?? "text/plain",
          });
          res.end(Buffer.from(await response.arrayBuffer()));
        })
        .catch(() => {
          res.writeHead(502).end();
        });
    });
  });
  await new Promise<void>((ready) => server.listen(0, "127.0.0.1", ready));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** The "a -> b" pairs of a wait's output, in order. */
const transitions = (output: string): [string, string][] =>
  [
    ...output.matchAll(
      /^\d\d:\d\d:\d\dZ {2}([a-z][a-z -]*) -> ([a-z][a-z -]*?)(?: \(target: [a-z -]+\))?$/gm,
    ),
  ].map((m) => [m[1]!, m[2]!]);

describe("anvil --wait without the event stream", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  let proxy: { url: string; server: Server };

  beforeAll(async () => {
    ctx = await startConductor({ fakeDelayMs: 700 });
    proxy = await proxyWithoutEvents(ctx.url);
  });
  afterAll(async () => {
    await new Promise((closed) => proxy.server.close(closed));
    await ctx.stop();
  });

  it("follows the node by polling: a chain of state changes from manageable to available, exit 0", async () => {
    const created = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      body: { driver: "fake-hardware", name: "p1" },
    });
    expect(created.status).toBe(201);
    expect((await anvil(proxy.url, ["node", "manage", "p1", "--wait"])).code).toBe(0);
    const run = await anvil(proxy.url, ["node", "provide", "p1", "--wait"]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const seen = transitions(run.stdout);
    // polling samples: states shorter than a poll may be skipped, but the chain is unbroken and ordered
    expect(seen.length).toBeGreaterThan(0);
    expect(seen[0]?.[0]).toBe("manageable");
    expect(seen.at(-1)?.[1]).toBe("available");
    for (let i = 1; i < seen.length; i++) expect(seen[i]?.[0]).toBe(seen[i - 1]?.[1]);
    expect(run.stdout).toMatch(/p1 is available\n$/);
  });
});
