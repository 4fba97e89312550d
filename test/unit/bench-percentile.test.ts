import { describe, expect, it } from "vitest";
import { percentile } from "../../scripts/bench/percentile.ts";

describe("the benches' percentile (nearest rank)", () => {
  const hundred = Array.from({ length: 100 }, (_, i) => i + 1);

  it("is the value at rank ceil(p·n), so p99 of 1,000 samples is the 10th slowest", () => {
    expect(percentile(hundred, 50)).toBe(50);
    expect(percentile(hundred, 99)).toBe(99);
    expect(percentile(hundred, 100)).toBe(100);
    const thousand = Array.from({ length: 1000 }, (_, i) => i);
    expect(percentile(thousand, 99)).toBe(thousand[989]);
  });

  it("stays inside the samples at the edges, and is NaN without any", () => {
    expect(percentile(hundred, 0)).toBe(1);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeNaN();
  });
});
