import { describe, expect, it } from "vitest";
import {
  etaSeconds,
  formatBytes,
  formatEta,
  formatProgress,
  formatRate,
  percentOf,
} from "../../conductor/cli/progress.ts";

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

describe("progress formatting", () => {
  it("formats bytes in binary units with one decimal", () => {
    expect(formatBytes(0)).toBe("0 B");
    expect(formatBytes(1023)).toBe("1023 B");
    expect(formatBytes(1024)).toBe("1.0 KiB");
    expect(formatBytes(1536)).toBe("1.5 KiB");
    expect(formatBytes(20 * GiB)).toBe("20.0 GiB");
    expect(formatBytes(3 * 1024 * GiB)).toBe("3.0 TiB");
  });

  it("moves up a unit instead of printing 1024.0", () => {
    expect(formatBytes(MiB - 1)).toBe("1.0 MiB");
  });

  it("marks nonsense sizes", () => {
    expect(formatBytes(-1)).toBe("?");
    expect(formatBytes(Number.NaN)).toBe("?");
  });

  it("formats rates", () => {
    expect(formatRate(85 * MiB)).toBe("85.0 MiB/s");
  });

  it("computes the ETA from what is left and the rate", () => {
    expect(etaSeconds({ done: 1 * GiB, total: 4 * GiB, rate: 100 * MiB })).toBe(31);
    expect(etaSeconds({ done: 0, total: null, rate: 100 })).toBeNull();
    expect(etaSeconds({ done: 10, total: 100, rate: 0 })).toBeNull();
    expect(etaSeconds({ done: 100, total: 100, rate: 5 })).toBe(0);
  });

  it("formats the ETA as m:ss or h:mm:ss", () => {
    expect(formatEta(0)).toBe("0:00");
    expect(formatEta(75)).toBe("1:15");
    expect(formatEta(3725)).toBe("1:02:05");
    expect(formatEta(null)).toBe("--:--");
  });

  it("clamps percentages and knows when there is no total", () => {
    expect(percentOf(1, 3)).toBe(33);
    expect(percentOf(5, 4)).toBe(100);
    expect(percentOf(5, null)).toBeNull();
    expect(percentOf(5, 0)).toBeNull();
  });

  it("builds the progress line", () => {
    expect(
      formatProgress({
        step: "write_image",
        bytes_done: 1.5 * GiB,
        bytes_total: 4 * GiB,
        rate_bps: 85 * MiB,
      }),
    ).toBe("write_image  1.5 GiB / 4.0 GiB  37%  85.0 MiB/s  ETA 0:31");
  });

  it("leaves out the percentage and ETA when the size is unknown (compressed streams)", () => {
    expect(
      formatProgress({ step: "write_image", bytes_done: 300 * MiB, bytes_total: null, rate_bps: 0 }),
    ).toBe("write_image  300.0 MiB  0 B/s");
  });
});
