import fc from "fast-check";
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

  it("stay within every bound whatever agents send (property)", () => {
    const limits = { perNode: 3, total: 10, totalBytes: 2_000, maxAgeMs: 1_000 };
    const result = fc.record({
      id: fc.string({ minLength: 1, maxLength: 128 }),
      node: fc.constantFrom("n1", "n2", "n3", "n4", "n5"),
      value: fc.oneof(fc.string({ maxLength: 3_000 }), fc.jsonValue({ maxDepth: 4 })),
    });
    fc.assert(
      fc.property(fc.array(result, { maxLength: 60 }), (sent) => {
        const kept = new UnclaimedResults(limits, () => 0);
        const latest = new Map<string, { node: string; value: unknown }>();
        for (const r of sent) {
          kept.keep(r.id, r.node, ok(r.value));
          latest.set(r.id, { node: r.node, value: r.value });
          expect(kept.size).toBeLessThanOrEqual(limits.total);
        }
        const perNode = new Map<string, number>();
        let bytes = 0;
        for (const [id, { node, value }] of latest) {
          const claimed = kept.claim(id, node);
          if (claimed === undefined) continue;
          expect(claimed).toEqual(ok(value)); // never another id's or another node's result
          perNode.set(node, (perNode.get(node) ?? 0) + 1);
          bytes += id.length + JSON.stringify(claimed).length;
        }
        for (const count of perNode.values()) expect(count).toBeLessThanOrEqual(limits.perNode);
        expect(bytes).toBeLessThanOrEqual(limits.totalBytes);
        expect(kept.size).toBe(0);
      }),
      { numRuns: 300 },
    );
  });
});
