import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ChunkCache } from "../../agent/swarm/chunk-cache.ts";
import { SwarmTracker } from "../../conductor/agents/swarm-tracker.ts";
import { silentLogger } from "../../shared/log.ts";
import { parseFrame } from "../../shared/protocol.ts";
import { SwarmStatsSchema, bearerToken, chunkPath, parseChunkPath } from "../../shared/swarm.ts";

const SHA = "a".repeat(64);
const OTHER = "b".repeat(64);

function tracker(waitMs = 60_000): SwarmTracker {
  return new SwarmTracker({ logger: silentLogger, chunkBytes: 10, assigneeWaitMs: waitMs });
}

function join(t: SwarmTracker, node: string): string {
  const answer = t.join(node, {
    image: "http://store/img",
    checksum: "sha256:x",
    size: 35,
    endpoint: "http://127.0.0.1:1/",
  });
  if (answer.kind !== "joined") throw new Error("not joined");
  return answer.wave;
}

describe("swarm chunk paths and bearer tokens", () => {
  it("round-trips every wave id and index", () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[A-Za-z0-9_-]{1,128}$/),
        fc.nat({ max: (1 << 24) - 1 }),
        (wave, index) => {
          expect(parseChunkPath(chunkPath(wave, index))).toEqual({ wave, index });
        },
      ),
    );
  });

  it("never throws on any path, and accepts only what it can print back", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 400 }), (path) => {
        const parsed = parseChunkPath(path);
        if (parsed !== null) expect(chunkPath(parsed.wave, parsed.index)).toBe(path);
      }),
    );
    for (const bad of ["/swarm/w/01", "/swarm/w/-1", "/swarm/w/16777216", "/swarm/../1", "/swarm/w/1/x"])
      expect(parseChunkPath(bad)).toBeNull();
  });

  it("reads only well-formed bearer headers", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 400 }), (header) => {
        const token = bearerToken(header);
        if (token !== null) expect(header).toBe(`Bearer ${token}`);
      }),
    );
    expect(bearerToken(`Bearer ${"x".repeat(43)}`)).toBe("x".repeat(43));
    expect(bearerToken(`Bearer short`)).toBeNull();
    expect(bearerToken(undefined)).toBeNull();
  });

  it("swarm frames from the wire never throw and are refused when malformed", () => {
    fc.assert(
      fc.property(
        fc.record({
          type: fc.constantFrom("swarm_join", "swarm_ask", "swarm_have", "swarm_drop", "swarm_reply"),
          v: fc.constantFrom(1, 2),
          id: fc.string(),
          wave: fc.string(),
          index: fc.oneof(fc.integer(), fc.double()),
          sha256: fc.string(),
          endpoint: fc.string(),
        }),
        (frame) => {
          const parsed = parseFrame(JSON.stringify(frame), 65_536);
          // random fields never make a valid join (its endpoint), have (its hash) or reply (its answer)
          if (frame.type !== "swarm_ask" && frame.type !== "swarm_drop") expect(parsed.ok).toBe(false);
        },
      ),
    );
    const ok = parseFrame(
      JSON.stringify({ type: "swarm_have", v: 1, wave: "w", index: 3, sha256: SHA, store: true }),
      65_536,
    );
    expect(ok.ok).toBe(true);
    const badEndpoint = parseFrame(
      JSON.stringify({
        type: "swarm_join",
        v: 1,
        id: "1",
        image: "http://x/i",
        size: 5,
        endpoint: "http://user:pw@10.0.0.1:8/",
      }),
      65_536,
    );
    expect(badEndpoint.ok).toBe(false);
  });
});

describe("SwarmTracker", () => {
  it("assigns a chunk nobody holds to the first asker, then names it to others with the anchor", async () => {
    const t = tracker();
    const wave = join(t, "a");
    join(t, "b");
    expect(await t.ask("a", wave, 0)).toEqual({ kind: "store" });
    const waiting = t.ask("b", wave, 0);
    t.have("a", { wave, index: 0, sha256: SHA, store: true });
    expect(await waiting).toEqual({
      kind: "peers",
      sha256: SHA,
      peers: [{ node: "a", url: "http://127.0.0.1:1/" }],
    });
  });

  it("spreads store fetches: a member fetching one chunk waits while another takes the next", async () => {
    const t = tracker();
    const wave = join(t, "a");
    join(t, "b");
    expect(await t.ask("a", wave, 0)).toEqual({ kind: "store" });
    let answered: string | undefined;
    const aNext = t.ask("a", wave, 1).then((answer) => (answered = answer.kind));
    await new Promise((settled) => setImmediate(settled));
    expect(answered).toBeUndefined(); // a already fetches chunk 0
    expect(await t.ask("b", wave, 1)).toEqual({ kind: "store" }); // b's hand is free
    t.have("b", { wave, index: 1, sha256: SHA, store: true });
    await aNext;
    expect(answered).toBe("peers");
    // a chunk nobody fetches goes to a waiting member as soon as its own fetch is done
    const aThird = t.ask("a", wave, 2);
    t.have("a", { wave, index: 0, sha256: SHA, store: true });
    expect(await aThird).toEqual({ kind: "store" });
  });

  it("a member alone in its wave fetches its whole read-ahead window at once", async () => {
    const t = tracker();
    const wave = join(t, "a");
    const answers = await Promise.all([0, 1, 2, 3].map((i) => t.ask("a", wave, i)));
    expect(answers.map((a) => a.kind)).toEqual(["store", "store", "store", "store"]);
  });

  it("leaving an earlier wave (its linger time over) keeps the node in the wave it writes now", async () => {
    const t = tracker();
    const first = join(t, "a");
    const second = t.join("a", {
      image: "http://store/other",
      checksum: "sha256:y",
      size: 35,
      endpoint: "http://127.0.0.1:1/",
    });
    if (second.kind !== "joined") throw new Error("not joined");
    t.leave("a", first);
    expect(await t.ask("a", second.wave, 0)).toEqual({ kind: "store" });
    t.leave("a");
    expect((await t.ask("a", second.wave, 1)).kind).toBe("refused");
  });

  it("a waiter whose assignee leaves becomes the assignee", async () => {
    const t = tracker();
    const wave = join(t, "a");
    join(t, "b");
    await t.ask("a", wave, 1);
    const waiting = t.ask("b", wave, 1);
    t.leave("a");
    expect(await waiting).toEqual({ kind: "store" });
  });

  it("the wait for an assignee is bounded: then the store", async () => {
    const t = tracker(20);
    const wave = join(t, "a");
    join(t, "b");
    await t.ask("a", wave, 2);
    expect(await t.ask("b", wave, 2)).toEqual({ kind: "store" });
  });

  it("a peer reported for bad bytes is never named again; a conflicting store hash is not a holder", async () => {
    const t = tracker();
    const wave = join(t, "a");
    join(t, "b");
    join(t, "c");
    await t.ask("a", wave, 0);
    t.have("a", { wave, index: 0, sha256: SHA, store: true });
    t.drop("b", wave, { index: 0, peer: "a", reason: "bad_bytes" });
    expect(await t.ask("c", wave, 0)).toEqual({ kind: "store" });
    t.have("c", { wave, index: 0, sha256: OTHER, store: true });
    expect(await t.ask("b", wave, 0)).toEqual({ kind: "store" });
  });

  it("refuses chunks past the end and strangers", async () => {
    const t = tracker();
    const wave = join(t, "a");
    expect((await t.ask("a", wave, 4)).kind).toBe("refused");
    expect((await t.ask("z", wave, 0)).kind).toBe("refused");
  });
});

describe("ChunkCache", () => {
  it("keeps at most maxBytes, evicting the least recently used and saying so", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat({ max: 20 }), fc.nat({ max: 40 })), { maxLength: 60 }), (puts) => {
        const evicted: number[] = [];
        const cache = new ChunkCache(100, (i) => evicted.push(i));
        for (const [index, length] of puts) cache.put(index, [Buffer.alloc(length)]);
        expect(cache.size).toBeLessThanOrEqual(100);
        const last = puts.at(-1);
        if (last !== undefined) expect(cache.has(last[0])).toBe(last[1] <= 100);
      }),
    );
    const cache = new ChunkCache(10);
    cache.put(1, [Buffer.alloc(5)]);
    cache.put(2, [Buffer.alloc(5)]);
    cache.get(1);
    cache.put(3, [Buffer.alloc(5)]);
    expect([cache.has(1), cache.has(2), cache.has(3)]).toEqual([true, false, true]);
  });
});

describe("an agent's swarm figures (outside input, stored in driver_internal_info)", () => {
  const stats = (peers: number, reason = "bad_bytes") => ({
    wave: "w1",
    chunk_bytes: 4194304,
    bytes_from_store: 1,
    bytes_from_peers: 2,
    per_peer: Object.fromEntries(Array.from({ length: peers }, (_, i) => [`node-${i}`, i])),
    bytes_served: 0,
    bad_chunks: 0,
    dropped_peers: Object.fromEntries(Array.from({ length: peers }, (_, i) => [`node-${i}`, reason])),
  });

  it("takes a wave's worth of peers and refuses more, or over-long texts, without throwing", () => {
    expect(SwarmStatsSchema.safeParse(stats(1024)).success).toBe(true);
    expect(SwarmStatsSchema.safeParse(stats(1025)).success).toBe(false);
    expect(SwarmStatsSchema.safeParse(stats(1, "x".repeat(65))).success).toBe(false);
    fc.assert(
      fc.property(fc.anything({ maxDepth: 4 }), (value) => {
        expect(() => SwarmStatsSchema.safeParse(value)).not.toThrow();
      }),
      { numRuns: 300 },
    );
  });
});
