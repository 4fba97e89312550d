import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { smartCheck, parseSmartHealth, smartVerdict } from "../../agent/commands/smart-check.ts";
import type { CommandContext } from "../../agent/commands/command.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { CodedError } from "../../shared/errors.ts";
import { silentLogger } from "../../shared/log.ts";
import { simulatedInventory } from "../../agent/hardware/simulated/sample-inventory.ts";

const DISKS = ["/tmp/anvil-smart-a.disk", "/tmp/anvil-smart-b.disk"];

function context(smartFailing: string[]): CommandContext & { messages: string[] } {
  const messages: string[] = [];
  const backend = new SimulatedBackend({
    inventory: simulatedInventory({
      macs: ["52:54:00:aa:bb:01"],
      disks: DISKS.map((name, i) => ({ name, size: 1024 ** 3, serial: `S${i}` })),
    }),
    smartFailing,
  });
  return {
    backend,
    signal: new AbortController().signal,
    logger: silentLogger,
    progress: (p) => void messages.push(p.message ?? ""),
    afterResult: () => undefined,
    messages,
  };
}

describe("smart_check", () => {
  it("passes when every disk's SMART health passes, reporting each disk", async () => {
    const ctx = context([]);
    expect(await smartCheck({}, ctx)).toEqual({
      devices: DISKS.map((device) => ({ device, health: "passed" })),
    });
    expect(ctx.messages).toEqual(DISKS.map((d) => `reading SMART health of ${d}`));
  });

  it("fails naming the disk the simulated machine marks failing", async () => {
    const failure = await smartCheck({}, context([DISKS[1]!])).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(CodedError);
    expect((failure as CodedError).code).toBe("COMMAND_FAILED");
    expect((failure as CodedError).message).toBe(
      `smart_check: SMART reports disk ${DISKS[1]} failing: SMART overall-health self-assessment: FAILED`,
    );
  });

  it("checks only the named disks, and refuses a disk the machine does not have", async () => {
    expect(await smartCheck({ devices: [DISKS[0]!] }, context([DISKS[1]!]))).toEqual({
      devices: [{ device: DISKS[0], health: "passed" }],
    });
    await expect(smartCheck({ devices: ["/dev/nope"] }, context([]))).rejects.toMatchObject({
      code: "BAD_ARGS",
      message: "smart_check: no such disk: /dev/nope",
    });
  });
});

describe("parseSmartHealth", () => {
  it("reads smartctl's verdicts: passed, failed, exit bit 3, no SMART", () => {
    const report = (o: object) => JSON.stringify({ json_format_version: [1, 0], ...o });
    expect(parseSmartHealth("/dev/sda", report({ smart_status: { passed: true } }), 0).health).toBe("passed");
    expect(parseSmartHealth("/dev/sda", report({ smart_status: { passed: false } }), 8).health).toBe(
      "failing",
    );
    expect(parseSmartHealth("/dev/sda", report({ smartctl: { exit_status: 8 } }), 8).health).toBe("failing");
    const virtio = report({
      smartctl: {
        exit_status: 4,
        messages: [{ string: "SMART support is: Unavailable", severity: "error" }],
      },
    });
    expect(parseSmartHealth("/dev/vda", virtio, 4)).toEqual({
      device: "/dev/vda",
      health: "unknown",
      message: "SMART support is: Unavailable",
    });
    expect(parseSmartHealth("/dev/sda", "", 8).health).toBe("failing");
  });

  it("fails a drive over the reallocated or pending sector thresholds, and names an NVMe critical warning", () => {
    const ata = (reallocated: number, pending: number) =>
      JSON.stringify({
        smart_status: { passed: true },
        ata_smart_attributes: {
          table: [
            {
              id: 5,
              name: "Reallocated_Sector_Ct",
              raw: { value: reallocated, string: String(reallocated) },
            },
            { id: 197, name: "Current_Pending_Sector", raw: { value: pending, string: String(pending) } },
          ],
        },
      });
    const limits = { maxReallocated: 10, maxPending: 0 };
    expect(smartVerdict("/dev/sda", { stdout: ata(10, 0), code: 0 }, limits)).toEqual({
      device: "/dev/sda",
      health: "passed",
      reallocated_sectors: 10,
      pending_sectors: 0,
    });
    expect(smartVerdict("/dev/sda", { stdout: ata(11, 0), code: 0 }, limits)).toMatchObject({
      health: "failing",
      message: "11 reallocated sectors (more than 10)",
    });
    expect(smartVerdict("/dev/sda", { stdout: ata(0, 2), code: 0 }, limits)).toMatchObject({
      health: "failing",
      message: "2 pending sectors (more than 0)",
    });
    // what smartctl 7.3 says of QEMU's NVMe drive given smart_critical_warning=4 (reliability degraded)
    const nvme = JSON.stringify({
      smartctl: { exit_status: 8 },
      smart_status: { passed: false, nvme: { value: 4, reliability_degraded: true } },
      nvme_smart_health_information_log: { critical_warning: 4, media_errors: 0 },
    });
    expect(parseSmartHealth("/dev/nvme0n1", nvme, 8)).toEqual({
      device: "/dev/nvme0n1",
      health: "failing",
      message: "SMART overall-health self-assessment: FAILED (NVMe critical warning 0x4)",
      critical_warning: 4,
      media_errors: 0,
    });
  });

  it("checks the thresholds the step is given", async () => {
    await expect(
      smartCheck({ max_reallocated_sectors: 5, max_pending_sectors: 1 }, context([])),
    ).resolves.toMatchObject({ devices: DISKS.map((device) => ({ device, health: "passed" })) });
  });

  it("never throws on whatever smartctl prints, and fails only on smartctl's own failing signs", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.json(),
          fc.jsonValue().map((v) => JSON.stringify(v)),
        ),
        fc.option(fc.integer({ min: 0, max: 255 })),
        (stdout, code) => {
          const result = parseSmartHealth("/dev/sdz", stdout, code);
          expect(["passed", "failing", "unknown"]).toContain(result.health);
          expect(result.device).toBe("/dev/sdz");
          if (result.health === "failing") {
            let parsed: unknown;
            try {
              parsed = JSON.parse(stdout);
            } catch {
              parsed = undefined;
            }
            const said = JSON.stringify(parsed ?? null);
            const exitBit = ((code ?? 0) & 8) !== 0;
            expect(
              exitBit ||
                said.includes('"passed":false') ||
                said.includes('"exit_status"') ||
                said.includes('"ata_smart_attributes"'),
            ).toBe(true);
          }
        },
      ),
    );
  });
});
