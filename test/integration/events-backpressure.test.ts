import { once } from "node:events";
import { request } from "node:http";
import { connect } from "node:net";
import type { Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/wait.ts";
import { api, faultOf, startConductor } from "../helpers/conductor.ts";

const KiB = 1024;

/** A subscriber that reads: counts the ids it receives. */
function readingSubscriber(url: string): Promise<{ ids: number[]; close(): void }> {
  return new Promise((resolve, reject) => {
    const ids: number[] = [];
    let pending = "";
    const req = request(`${url}/v1/events`, (res) => {
      res.setEncoding("utf8");
      res.on("data", (text: string) => {
        pending += text;
        const blocks = pending.split("\n\n");
        pending = blocks.pop() ?? "";
        for (const block of blocks) {
          const id = /^id: (\d+)$/m.exec(block)?.[1];
          if (id !== undefined) ids.push(Number(id));
        }
      });
      resolve({ ids, close: () => req.destroy() });
    });
    req.on("error", reject);
    req.end();
  });
}

/** A subscriber that sends its request and never reads a byte of the answer. */
async function stalledSubscriber(port: number): Promise<Socket> {
  const socket = connect(port, "127.0.0.1");
  socket.on("error", () => undefined);
  await once(socket, "connect");
  socket.write("GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  socket.pause();
  return socket;
}

describe("issue 11 class 9: the event stream's subscribers are capped and bounded", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>> | undefined;
  afterEach(async () => {
    await ctx?.stop();
    ctx = undefined;
  });

  it("a stalled subscriber is disconnected with a bounded backlog; a reading one gets every event", async () => {
    const maxBufferedBytes = 64 * KiB;
    ctx = await startConductor({ events: { maxSubscribers: 3, maxBufferedBytes } });
    const { url, conductor } = ctx;
    const port = Number(new URL(url).port);
    const serverSockets: Socket[] = [];
    conductor.app.server.on("connection", (socket: Socket) => serverSockets.push(socket));

    const stalled = await stalledSubscriber(port);
    const reader = await readingSubscriber(url);
    await waitFor(() => conductor.events.subscribers === 2, { what: "two subscribers" });
    const third = await readingSubscriber(url);
    await waitFor(() => conductor.events.subscribers === 3, { what: "three subscribers" });

    // the cap: a fourth gets 503 in Ironic's envelope
    const refused = await api(`${url}/v1/events`);
    expect(refused.status).toBe(503);
    expect(faultOf(refused.body)).toMatch(/limit/);

    // publish far more than the kernel's and our buffers hold (about 40 MiB), in bursts well under the
    // bound (16 KiB), yielding between them so readers read
    const padding = "p".repeat(4 * KiB);
    const events = 10_000;
    let peakBuffered = 0;
    for (let i = 0; i < events; i++) {
      conductor.events.publish({ type: "test", node: "n", padding });
      if (i % 4 === 3) {
        for (const socket of serverSockets) peakBuffered = Math.max(peakBuffered, socket.writableLength);
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    await waitFor(() => conductor.events.subscribers === 2, { what: "the stalled subscriber to be dropped" });
    await waitFor(() => reader.ids.length === events && third.ids.length === events, {
      what: "the readers to get every event",
      timeoutMs: 60_000,
    });
    expect(reader.ids).toEqual(Array.from({ length: events }, (_, i) => reader.ids[0]! + i));
    // bounded: the limit plus the one event (and headers) written before the check saw it
    expect(peakBuffered).toBeLessThanOrEqual(maxBufferedBytes + 8 * KiB);

    // the slot came back
    const again = await readingSubscriber(url);
    await waitFor(() => conductor.events.subscribers === 3, { what: "a new subscriber" });
    for (const sub of [reader, third, again]) sub.close();
    stalled.destroy();
    console.log(
      `class 9: ${events} events of 4 KiB; stalled subscriber dropped, peak backlog ${(peakBuffered / KiB).toFixed(0)} KiB (limit ${maxBufferedBytes / KiB} KiB)`,
    );
  });
});
