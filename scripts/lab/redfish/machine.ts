import type { SerialEndpoint } from "./serial.ts";

/** What the stand-in BMC drives: an in-memory machine (fast tests) or a QEMU process through QMP (the lab). */

export type MachinePower = "On" | "Off" | "PoweringOn" | "PoweringOff";
export type MachineReset =
  "On" | "ForceOn" | "ForceOff" | "GracefulShutdown" | "ForceRestart" | "GracefulRestart" | "Nmi";
export const RESET_TYPES: readonly MachineReset[] = [
  "On",
  "ForceOn",
  "ForceOff",
  "GracefulShutdown",
  "ForceRestart",
  "GracefulRestart",
  "Nmi",
];

/** The boot source the machine takes on its next start ("Pxe", "Hdd", "Cd", ...; "None" for its own order). */
export interface Machine {
  power(): Promise<MachinePower>;
  reset(type: MachineReset, bootSource: string): Promise<void>;
  /** A virtual CD's image URL, null when ejected (the QEMU machine passes it on its next start). */
  setMedia?(image: string | null): Promise<void>;
  /** Where its serial port is reached now (none: the BMC's serial console has nothing to relay). */
  serialPort?(): SerialEndpoint | undefined;
  close?(): Promise<void>;
}

/** A machine in memory: power changes at once (or after `settleMs`, showing PoweringOn/Off meanwhile). */
export class MemoryMachine implements Machine {
  state: MachinePower;
  /** Every reset the machine took, with the boot source it started from (tests read it). */
  readonly log: { type: MachineReset; bootSource: string }[] = [];
  nmis = 0;
  private settle: NodeJS.Timeout | undefined;

  /** @param options.serial a peer that plays the machine's serial port (a test's TCP server) */
  constructor(options: { power?: "On" | "Off"; settleMs?: number; serial?: SerialEndpoint } = {}) {
    this.state = options.power ?? "Off";
    this.settleMs = options.settleMs ?? 0;
    this.serial = options.serial;
  }

  private readonly settleMs: number;
  private readonly serial: SerialEndpoint | undefined;

  serialPort(): SerialEndpoint | undefined {
    return this.serial;
  }

  power(): Promise<MachinePower> {
    return Promise.resolve(this.state);
  }

  reset(type: MachineReset, bootSource: string): Promise<void> {
    this.log.push({ type, bootSource });
    switch (type) {
      case "On":
      case "ForceOn":
        this.move("PoweringOn", "On");
        break;
      case "ForceOff":
      case "GracefulShutdown":
        this.move("PoweringOff", "Off");
        break;
      case "ForceRestart":
      case "GracefulRestart":
        this.move("PoweringOn", "On");
        break;
      case "Nmi":
        this.nmis += 1;
        break;
    }
    return Promise.resolve();
  }

  private move(transition: MachinePower, final: MachinePower): void {
    if (this.settle) clearTimeout(this.settle);
    if (this.settleMs <= 0) {
      this.state = final;
      return;
    }
    this.state = transition;
    this.settle = setTimeout(() => {
      this.state = final;
    }, this.settleMs);
    this.settle.unref();
  }

  close(): Promise<void> {
    if (this.settle) clearTimeout(this.settle);
    return Promise.resolve();
  }
}
