import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { LabNode } from "./state.ts";

/** What the BMC really did to the machine (a retransmitted IPMI command that changed nothing is not counted). */
export interface PowerActions {
  /** Power-ons that started the VM. */
  on: number;
  /** Hard power-offs that stopped a running VM. */
  off: number;
  /** Resets (in place, or a restart into a new boot order). */
  reset: number;
  /** ACPI power button presses. */
  softOff: number;
}

/** Counts the lab hook's log lines ("<ms> <key> <what>"). */
export function countPowerActions(hookLog: string[]): PowerActions {
  const count = (pattern: RegExp): number => hookLog.filter((line) => pattern.test(line)).length;
  return {
    on: count(/^\d+ power start /),
    off: count(/^\d+ power stop$/),
    reset: count(/^\d+ reset (start|system_reset)/),
    softOff: count(/^\d+ shutdown acpi-powerdown$/),
  };
}

/** A lab node seen from the host: its BMC's events, its VM's start/exit times and its serial console. */
export interface LabNodeProbe {
  /** Every chassis change the BMC made ("power 1", "boot pxe", ...), oldest first. */
  bmcEvents(): Promise<string[]>;
  /** The lab hook's log: "<ms> <key> <what>" for every action and every VM exit. */
  hookLog(): Promise<string[]>;
  powerActions(): Promise<PowerActions>;
  /** Each QEMU start (a power on or a reset into a new boot order): wall-clock ms and boot order (n: PXE, c: disk). */
  vmStarts(): Promise<{ at: number; order: string }[]>;
  serial(): Promise<string>;
  /** Resolves with the console once it matches; rejects after timeoutMs with the console's tail. */
  waitForSerial(pattern: RegExp, timeoutMs: number): Promise<string>;
}

export function probeLabNode(node: LabNode): LabNodeProbe {
  const read = (path: string): Promise<string> => readFile(path, "utf8").catch(() => "");
  const bmcEvents = async (): Promise<string[]> =>
    (await read(join(node.dir, "bmc", "chassis", "events"))).split("\n").filter((line) => line !== "");
  const serial = (): Promise<string> => read(join(node.dir, "vm", "serial.log"));
  const hookLog = async (): Promise<string[]> =>
    (await read(join(node.dir, "vm", "hook.log"))).split("\n").filter((line) => line !== "");
  return {
    bmcEvents,
    hookLog,
    powerActions: async () => countPowerActions(await hookLog()),
    vmStarts: async () =>
      (await hookLog()).flatMap((line) => {
        const match = /^(\d+) \S+ start order=(\w+)/.exec(line);
        return match ? [{ at: Number(match[1]), order: match[2] ?? "" }] : [];
      }),
    serial,
    async waitForSerial(pattern, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const text = await serial();
        if (pattern.test(text)) return text;
        if (Date.now() > deadline)
          throw new Error(
            `${pattern} not on ${node.name}'s console after ${timeoutMs} ms:\n${text.slice(-3000)}`,
          );
        await sleep(500);
      }
    },
  };
}
