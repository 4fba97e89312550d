import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkSmartHealth, parseSmartHealth } from "../../agent/commands/check-smart-health.ts";
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

describe("check_smart_health", () => {
  it("passes when every disk's SMART health passes, reporting each disk", async () => {
    const ctx = context([]);
    expect(await checkSmartHealth({}, ctx)).toEqual({
      devices: DISKS.map((device) => ({ device, health: "passed" })),
    });
    expect(ctx.messages).toEqual(DISKS.map((d) => `reading SMART health of ${d}`));
  });

  it("fails naming the disk the simulated machine marks failing", async () => {
    const failure = await checkSmartHealth({}, context([DISKS[1]!])).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(CodedError);
    expect((failure as CodedError).code).toBe("COMMAND_FAILED");
    expect((failure as CodedError).message).toBe(
      `check_smart_health: SMART reports disk ${DISKS[1]} failing`,
    );
  });

  it("checks only the named disks, and refuses a disk the machine does not have", async () => {
    expect(await checkSmartHealth({ devices: [DISKS[0]!] }, context([DISKS[1]!]))).toEqual({
      devices: [{ device: DISKS[0], health: "passed" }],
    });
    await expect(checkSmartHealth({ devices: ["/dev/nope"] }, context([]))).rejects.toMatchObject({
      code: "BAD_ARGS",
      message: "check_smart_health: no such disk: /dev/nope",
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
            expect(exitBit || said.includes('"passed":false') || said.includes('"exit_status"')).toBe(true);
          }
        },
      ),
    );
  });
});
