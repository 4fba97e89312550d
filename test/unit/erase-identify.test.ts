import { readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseHdparmIdentify } from "../../agent/hardware/linux/hdparm-identify.ts";
import { parseNvmeIdentify, parseSanitizeLog } from "../../agent/hardware/linux/nvme-identify.ts";

const fixture = (name: string): string =>
  readFileSync(join(import.meta.dirname, "../fixtures/erase", name), "utf8");

describe("hdparm -I", () => {
  it("reads a drive that can be erased: supported, not frozen, enhanced erase, zeros after TRIM", () => {
    expect(parseHdparmIdentify(fixture("hdparm-I-not-frozen-enhanced.txt"))).toEqual({
      security: {
        supported: true,
        enabled: false,
        locked: false,
        frozen: false,
        countExpired: false,
        enhancedErase: true,
        eraseMinutes: 24,
        enhancedEraseMinutes: 24,
      },
      trimReadsZero: true,
    });
  });

  it("reads a frozen drive as frozen", () => {
    const { security, trimReadsZero } = parseHdparmIdentify(fixture("hdparm-I-frozen.txt"));
    expect(security).toMatchObject({ supported: true, frozen: true, enabled: false, locked: false });
    expect(trimReadsZero).toBe(false);
  });

  it("reads a set password (enabled) and a locked drive", () => {
    expect(parseHdparmIdentify(fixture("hdparm-I-password-set.txt")).security).toMatchObject({
      enabled: true,
      locked: false,
      enhancedErase: false,
    });
    expect(parseHdparmIdentify(fixture("hdparm-I-locked.txt")).security).toMatchObject({
      enabled: true,
      locked: true,
    });
  });

  it("a drive without a Security section has no security", () => {
    expect(parseHdparmIdentify("/dev/sdb:\n\nATA device\nChecksum: correct\n").security).toBeNull();
  });

  it("never throws and never reports a frozen drive as usable, whatever the text", () => {
    let tried = 0;
    const line = fc.oneof(
      fc.constantFrom(
        "\t\tsupported",
        "\tnot\tfrozen",
        "\t\tfrozen",
        "Security: ",
        "\tnot\tenabled",
        "\t\tlocked",
      ),
      fc.string(),
    );
    fc.assert(
      fc.property(fc.array(line, { maxLength: 30 }), (lines) => {
        tried++;
        const { security } = parseHdparmIdentify(lines.join("\n"));
        if (security !== null)
          expect(security.frozen && !lines.some((l) => l.trim() === "frozen")).toBe(false);
      }),
      { numRuns: 500, seed: 13 },
    );
    console.log(`hdparm -I parser: ${tried} generated texts`);
    expect(tried).toBe(500);
  });
});

describe("nvme id-ctrl / id-ns", () => {
  it("WD SN730: format, crypto format, sanitize crypto and block", () => {
    const caps = parseNvmeIdentify(fixture("nvme-id-ctrl-wdc-sn730.json"), fixture("nvme-id-ns-512.json"));
    expect(caps).toEqual({
      format: true,
      cryptoFormat: true,
      sanitize: { crypto: true, block: true, overwrite: false },
      lbaf: 0,
      deallocatedReadZero: true,
    });
  });

  it("Micron 9200: format without crypto, no sanitize; no id-ns leaves the LBA format unknown", () => {
    expect(parseNvmeIdentify(fixture("nvme-id-ctrl-micron-9200.json"), null)).toEqual({
      format: true,
      cryptoFormat: false,
      sanitize: { crypto: false, block: false, overwrite: false },
      lbaf: null,
      deallocatedReadZero: false,
    });
  });

  it("QEMU 7.2's emulated NVMe (recorded here): format without crypto, no sanitize, zeros after deallocate", () => {
    expect(
      parseNvmeIdentify(fixture("nvme-id-ctrl-qemu-7.2.json"), fixture("nvme-id-ns-qemu-7.2.json")),
    ).toEqual({
      format: true,
      cryptoFormat: false,
      sanitize: { crypto: false, block: false, overwrite: false },
      lbaf: 0,
      deallocatedReadZero: true,
    });
  });

  it("the LBA format index takes FLBAS bits 6:5 as its high bits", () => {
    const ctrl = JSON.stringify({ oacs: 2, fna: 0 });
    expect(parseNvmeIdentify(ctrl, JSON.stringify({ flbas: 0x21 })).lbaf).toBe(0x11);
  });

  it("rejects text that is not id-ctrl JSON with an Error saying so", () => {
    expect(() => parseNvmeIdentify("NVME Identify Controller:\nvid : 0x1344", null)).toThrow(
      /did not print JSON/,
    );
    expect(() => parseNvmeIdentify("{}", null)).toThrow(/lacks oacs/);
  });

  it("hostile JSON: an Error or a capability record, never another kind of throw", () => {
    let tried = 0;
    const field = fc.oneof(fc.integer(), fc.double(), fc.string(), fc.constant(null), fc.boolean());
    const record = fc.record({ oacs: field, fna: field, sanicap: field }, { requiredKeys: [] });
    fc.assert(
      fc.property(fc.oneof(record, fc.jsonValue()), fc.oneof(record, fc.jsonValue()), (ctrl, ns) => {
        tried++;
        try {
          const caps = parseNvmeIdentify(JSON.stringify(ctrl), JSON.stringify(ns));
          expect(typeof caps.format).toBe("boolean");
        } catch (error) {
          expect(error).toBeInstanceOf(Error);
          expect((error as Error).message).toMatch(/^nvme id-ctrl/);
        }
      }),
      { numRuns: 500, seed: 13 },
    );
    console.log(`nvme identify parser: ${tried} generated inputs`);
    expect(tried).toBe(500);
  });
});

describe("nvme sanitize-log", () => {
  it("reads nvme-cli 1.x's flat numbers (in progress, half done)", () => {
    expect(parseSanitizeLog(fixture("nvme-sanitize-log-v1.json"))).toEqual({ status: 2, progress: 0.5 });
  });

  it("reads nvme-cli 2.x's nested status string (completed)", () => {
    expect(parseSanitizeLog(fixture("nvme-sanitize-log-v2.json")).status).toBe(1);
  });

  it("hostile JSON: a status in 0–7 with progress in 0–1, or an Error", () => {
    let tried = 0;
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), (value) => {
        tried++;
        try {
          const { status, progress } = parseSanitizeLog(JSON.stringify(value));
          expect(status >= 0 && status <= 7 && progress >= 0 && progress <= 1).toBe(true);
        } catch (error) {
          expect((error as Error).message).toMatch(/^nvme sanitize-log/);
        }
      }),
      { numRuns: 500, seed: 13 },
    );
    console.log(`sanitize-log parser: ${tried} generated inputs`);
    expect(tried).toBe(500);
  });
});
