import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ClusterQueue } from "../../agent/image/cluster-queue.ts";

describe("ClusterQueue", () => {
  it("property: interleaved pushes and pops come out in key order, with their columns, inside the budget", () => {
    let runs = 0;
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.tuple(fc.nat(5000), fc.integer(), fc.integer()), fc.constant("pop" as const)), {
          maxLength: 400,
        }),
        (ops) => {
          runs += 1;
          let reserved = 0;
          const queue = new ClusterQueue({ reserve: (bytes) => void (reserved += bytes) });
          const model: [number, number, number][] = [];
          const out = { key: 0, a: 0, b: 0 };
          for (const op of ops) {
            if (op === "pop") {
              if (model.length === 0) continue;
              model.sort((x, y) => x[0] - y[0]);
              const smallest = model[0]?.[0];
              queue.pop(out);
              expect(out.key).toBe(smallest);
              // Equal keys may come out in any order: remove the popped triple itself from the model.
              const at = model.findIndex(([k, a, b]) => k === out.key && a === out.a && b === out.b);
              expect(at).toBeGreaterThanOrEqual(0);
              model.splice(at, 1);
            } else {
              queue.push(op[0], op[1], op[2]);
              model.push(op);
            }
            expect(queue.size).toBe(model.length);
            expect(queue.peekKey()).toBe(model.length === 0 ? Infinity : Math.min(...model.map((m) => m[0])));
          }
          expect(reserved).toBeLessThanOrEqual(24 * Math.max(64, 2 * ops.length));
        },
      ),
      { numRuns: 300 },
    );
    console.log(`ClusterQueue property runs: ${runs}`);
  });

  it("a budget that refuses a growth stops the push before anything is allocated", () => {
    let reserved = 0;
    const queue = new ClusterQueue({
      reserve: (bytes) => {
        if (reserved + bytes > 64 * 24) throw new Error("over budget");
        reserved += bytes;
      },
    });
    for (let i = 0; i < 64; i += 1) queue.push(i, i);
    expect(() => queue.push(64, 64)).toThrow(/over budget/);
    expect(queue.size).toBe(64);
  });
});
