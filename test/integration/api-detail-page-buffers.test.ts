import { request, Agent, type IncomingMessage } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultConfig } from "../../conductor/config.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import { newNode } from "../../conductor/operations/node-record.ts";
import { startConductor } from "../helpers/conductor.ts";

const fake = defaultDrivers(defaultConfig()).get("fake-hardware")!;
const NODES = 1000;
/**
 * ~12 MB a page: more than the kernel takes on loopback while the client reads nothing (the sender's buffer
 * grows to 4 MB there), so the rest of the page waits in the conductor's buffer
 */
const EXTRA = { notes: "x".repeat(10_000) };

/** GET /v1/nodes/detail at latest as sent for `host` (its links carry it); `paused`: read nothing until asked. */
function detailPage(url: string, host: string, agent: Agent): Promise<IncomingMessage> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    request(
      {
        host: "127.0.0.1",
        port,
        path: `/v1/nodes/detail?limit=${NODES}`,
        agent,
        headers: { Host: host, "X-OpenStack-Ironic-API-Version": "latest" },
      },
      resolve,
    )
      .on("error", reject)
      .end();
  });
}

/** The same request on a raw socket that reads nothing until `read` is called (its bytes wait in the kernel). */
async function stalledPage(url: string, host: string): Promise<{ read(): Promise<string> }> {
  const { port } = new URL(url);
  const socket: Socket = connect(Number(port), "127.0.0.1");
  socket.pause();
  await new Promise((ready) => socket.once("connect", ready));
  socket.write(
    `GET /v1/nodes/detail?limit=${NODES} HTTP/1.1\r\nHost: ${host}\r\n` +
      "X-OpenStack-Ironic-API-Version: latest\r\nConnection: close\r\n\r\n",
  );
  return {
    async read() {
      const chunks: Buffer[] = [];
      for await (const chunk of socket) chunks.push(chunk as Buffer);
      const text = Buffer.concat(chunks).toString("utf8");
      return text.slice(text.indexOf("\r\n\r\n") + 4);
    },
  };
}

async function body(response: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of response) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * The detail page at latest is written into buffers reused from page to page (PageBuffers): a page whose
 * client has not read it yet keeps its buffer, so the pages sent meanwhile (other hosts in their links) never
 * show in it.
 */
describe("detail pages written into reused buffers, over a real socket", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;

  beforeAll(async () => {
    ctx = await startConductor();
    for (let i = 0; i < NODES; i++)
      await ctx.conductor.store.createNode({
        ...newNode({ driver: "fake-hardware" }, fake),
        name: `n-${i}`,
        extra: EXTRA,
      });
  }, 60_000);
  afterAll(() => ctx.stop());

  it("a page read late is the page as sent alone, whatever was sent meanwhile", async () => {
    const quick = new Agent({ keepAlive: true, maxSockets: 1 });
    const paused = await stalledPage(ctx.url, "slow.example:1");
    // the first page is being written (the server's first bytes are in the client's kernel buffer)
    await new Promise((resolve) => setTimeout(resolve, 200));
    // pages for other hosts, each read in full while the first waits in its socket
    const meanwhile: string[] = [];
    for (let i = 0; i < 6; i++)
      meanwhile.push(await body(await detailPage(ctx.url, `fast${i}.example:1`, quick)));
    const late = await paused.read();
    const alone = await body(await detailPage(ctx.url, "slow.example:1", quick));
    expect(JSON.parse(late)).toHaveProperty("nodes.length", NODES);
    expect(late).toBe(alone);
    expect(late).not.toContain("fast");
    for (let i = 0; i < 6; i++) {
      expect(meanwhile[i]).toContain(`"href":"http://fast${i}.example:1/v1/nodes/`);
      expect(meanwhile[i]!.replaceAll(`fast${i}`, "slow")).toBe(alone);
    }
    quick.destroy();
  }, 60_000);
});
