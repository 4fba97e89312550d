import { PassThrough } from "node:stream";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { watchBytes } from "../../conductor/agents/byte-budget.ts";
import { ConnectionCaps } from "../../conductor/agents/connection-caps.ts";
import { FrameRate } from "../../conductor/agents/frame-rate.ts";

describe("FrameRate", () => {
  it("lets a burst through, then the average rate", () => {
    let now = 0;
    const rate = new FrameRate({ perSecond: 10, burst: 20 }, () => now);
    let passed = 0;
    for (let i = 0; i < 100; i++) if (rate.take()) passed += 1;
    expect(passed).toBe(20);
    now += 1000;
    passed = 0;
    for (let i = 0; i < 100; i++) if (rate.take()) passed += 1;
    expect(passed).toBe(10);
  });

  it("never lets more than burst + rate × elapsed through (property)", () => {
    let runs = 0;
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 500 }), { maxLength: 300 }), (gaps) => {
        runs += 1;
        let now = 0;
        const rate = new FrameRate({ perSecond: 50, burst: 100 }, () => now);
        let passed = 0;
        for (const gap of gaps) {
          now += gap;
          if (rate.take()) passed += 1;
        }
        expect(passed).toBeLessThanOrEqual(100 + (now / 1000) * 50);
      }),
    );
    console.log(`FrameRate: ${runs} clock sequences`);
  });
});

describe("ConnectionCaps", () => {
  it("counts per source and in total, and gives slots back", () => {
    const caps = new ConnectionCaps({ maxConnections: 3, maxConnectionsPerSource: 2 });
    expect(caps.tryOpen("a").ok).toBe(true);
    expect(caps.tryOpen("a").ok).toBe(true);
    expect(caps.tryOpen("a")).toMatchObject({ ok: false, status: 429 });
    expect(caps.tryOpen("b").ok).toBe(true);
    expect(caps.tryOpen("c")).toMatchObject({ ok: false, status: 503 });
    caps.close("a");
    expect(caps.open).toBe(2);
    expect(caps.tryOpen("c").ok).toBe(true);
    caps.close("zzz"); // never opened: no effect
    expect(caps.open).toBe(3);
  });
});

describe("watchBytes", () => {
  it("reports once when the count passes the limit, and stops counting", () => {
    const socket = new PassThrough();
    const seen: number[] = [];
    const watch = watchBytes(socket, { limit: 100, onExceeded: (bytes) => seen.push(bytes) });
    socket.write(Buffer.alloc(60));
    socket.write(Buffer.alloc(60));
    socket.write(Buffer.alloc(60));
    expect(seen).toEqual([120]);
    expect(watch.bytes).toBe(120);
  });

  it("stop() before the limit: never reports", () => {
    const socket = new PassThrough();
    const seen: number[] = [];
    const watch = watchBytes(socket, { limit: 100, onExceeded: (bytes) => seen.push(bytes) });
    socket.write(Buffer.alloc(60));
    watch.stop();
    socket.resume();
    socket.write(Buffer.alloc(600));
    expect(seen).toEqual([]);
  });
});
