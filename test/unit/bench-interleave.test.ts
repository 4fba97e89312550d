import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { compareRounds, median, roundOrder } from "../../scripts/bench/interleave.ts";

describe("the benches' interleaved rounds", () => {
  it("alternate which side goes first: AB, BA, AB, …", () => {
    expect([0, 1, 2, 3].map((round) => roundOrder(["A", "B"], round).join(""))).toEqual([
      "AB",
      "BA",
      "AB",
      "BA",
    ]);
  });

  it("measure every side once a round, whatever the round", () => {
    fc.assert(
      fc.property(fc.array(fc.integer(), { maxLength: 6 }), fc.nat(100), (sides, round) => {
        expect([...roundOrder(sides, round)].sort()).toEqual([...sides].sort());
      }),
    );
  });

  it("take the median of an odd count, the mean of the middle two of an even one, NaN of none", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
  });

  it("report the median of the per-round ratios, not the ratio of the medians", () => {
    const log = vi.spyOn(console, "log").mockImplementation(() => undefined);
    try {
      // a slow round for both sides: per round this checkout is 2x the baseline, always
      const rounds = [
        { base: 10, here: 20, load: [1, 2] as [number, number] },
        { base: 100, here: 200, load: [3, 4] as [number, number] },
        { base: 12, here: 24, load: [2, 2] as [number, number] },
      ];
      const [row] = compareRounds([{ name: "x", unit: "/s", digits: 0, of: (n: number) => n }], rounds, {
        title: "t",
        baseline: "abc",
      });
      expect(row?.ratio).toBe(2);
      expect(row?.base).toBe("12");
      expect(row?.here).toBe("24");
      expect(row?.load).toBe("1.0–4.0");
      expect(log.mock.calls.flat().join("\n")).toContain(
        "| x (/s) | 12 | 24 | ×2.00 (×2.00–2.00) | 3 | 1.0–4.0 |",
      );
    } finally {
      log.mockRestore();
    }
  });
});
