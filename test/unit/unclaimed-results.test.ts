import { describe, expect, it } from "vitest";
import { UnclaimedResults } from "../../conductor/agents/unclaimed-results.ts";

const ok = (value: unknown) => ({ ok: true as const, value });

describe("results no call waits for", () => {
  it("are claimed once, by id and by the node whose agent sent them", () => {
    const kept = new UnclaimedResults();
    kept.keep("a", "node-1", ok(1));
    expect(kept.claim("a", "node-2")).toBeUndefined();
    expect(kept.claim("a", "node-1")).toEqual(ok(1));
    expect(kept.claim("a", "node-1")).toBeUndefined();
  });

  it("keep a node's newest few, the newest in all within a byte bound, and none past their age", () => {
    let now = 0;
    const kept = new UnclaimedResults({ perNode: 2, total: 3, totalBytes: 200, maxAgeMs: 1000 }, () => now);
    kept.keep("a1", "a", ok(1));
    kept.keep("a2", "a", ok(2));
    kept.keep("a3", "a", ok(3)); // a1 goes: the node's share is two
    expect(kept.claim("a1", "a")).toBeUndefined();
    kept.keep("b1", "b", ok(1));
    kept.keep("c1", "c", ok(1)); // four in all: the oldest (a2) goes
    expect(kept.size).toBe(3);
    expect(kept.claim("a2", "a")).toBeUndefined();
    kept.keep("big", "d", ok("x".repeat(150))); // over the byte bound with the others: they go first
    expect(kept.claim("big", "d")).toEqual(ok("x".repeat(150)));
    kept.keep("huge", "d", ok("x".repeat(500))); // larger than the whole bound: not kept
    expect(kept.claim("huge", "d")).toBeUndefined();
    kept.keep("old", "e", ok(1));
    now = 1001;
    expect(kept.claim("old", "e")).toBeUndefined();
  });
});
