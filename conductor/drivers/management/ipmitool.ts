import type { BootDevice } from "../../../shared/states.ts";
import { bootModeOf } from "../boot/boot-mode.ts";
import { DriverError } from "../errors.ts";
import type { CallOptions, DriverNode, ManagementInterface } from "../interfaces.ts";
import { parseIpmiDriverInfo } from "../ipmi/driver-info.ts";
import { Ipmitool } from "../ipmi/ipmitool.ts";

const SUPPORTED: readonly BootDevice[] = ["pxe", "disk", "cdrom", "bios", "safe"];

// `chassis bootparam get 5` prints "Boot Device Selector : <one of these>".
const SELECTORS: [RegExp, BootDevice | null][] = [
  [/No override/i, null],
  [/Safe-?Mode/i, "safe"],
  [/Force PXE/i, "pxe"],
  [/Hard-?Drive/i, "disk"],
  [/CD\/DVD/i, "cdrom"],
  [/BIOS Setup/i, "bios"],
];

/** Parses `chassis bootparam get 5`. @throws DriverError when the output has no device selector. */
export function parseBootParam(stdout: string): {
  boot_device: BootDevice | null;
  persistent: boolean | null;
} {
  const selector = /Boot Device Selector\s*:\s*(.*)/.exec(stdout)?.[1];
  if (selector === undefined) {
    throw new DriverError(`unexpected ipmitool bootparam output: ${stdout.trim().slice(0, 200)}`);
  }
  const device = SELECTORS.find(([pattern]) => pattern.test(selector))?.[1] ?? null;
  const persistent = /all future boots/i.test(stdout) ? true : /only next boot/i.test(stdout) ? false : null;
  return { boot_device: device, persistent };
}

/** Boot device through IPMI chassis boot options. */
export class IpmitoolManagement implements ManagementInterface {
  private readonly ipmitool: Ipmitool;

  constructor(options: { ipmitool?: Ipmitool } = {}) {
    this.ipmitool = options.ipmitool ?? new Ipmitool();
  }

  /** @throws InvalidDriverInfo */
  validate(node: DriverNode): void {
    parseIpmiDriverInfo(node.driver_info);
  }

  supportedBootDevices(): readonly BootDevice[] {
    return SUPPORTED;
  }

  /**
   * `chassis bootdev <device> options=persistent,efiboot` (each option only when it applies).
   * @throws InvalidDriverInfo, IpmiCommandError (kind "rejected" when the BMC refuses the device)
   */
  async setBootDevice(
    node: DriverNode,
    request: { device: BootDevice; persistent: boolean },
    options: CallOptions = {},
  ): Promise<void> {
    const info = parseIpmiDriverInfo(node.driver_info);
    if (!SUPPORTED.includes(request.device)) {
      throw new DriverError(`boot device ${String(request.device)} is not supported by ipmitool`);
    }
    const flags: string[] = [];
    if (request.persistent) flags.push("persistent");
    if (bootModeOf(node) === "uefi") flags.push("efiboot");
    const command = ["chassis", "bootdev", request.device];
    if (flags.length > 0) command.push(`options=${flags.join(",")}`);
    await this.ipmitool.run(info, command, options);
  }

  /**
   * IPMI carries the boot mode only in the boot flags (`chassis bootdev … options=efiboot`), so a new mode is
   * written by setting the current boot device again (`none` when no override is set) with the flag for the
   * mode, keeping its persistence. Later boot device changes carry it (bootModeOf reads the node's boot_mode).
   * @throws InvalidDriverInfo, IpmiCommandError, DriverError
   */
  async setBootMode(node: DriverNode, mode: "bios" | "uefi", options: CallOptions = {}): Promise<void> {
    const info = parseIpmiDriverInfo(node.driver_info);
    const current = parseBootParam(
      await this.ipmitool.run(info, ["chassis", "bootparam", "get", "5"], options),
    );
    const flags: string[] = [];
    if (current.boot_device !== null && current.persistent === true) flags.push("persistent");
    if (mode === "uefi") flags.push("efiboot");
    const command = ["chassis", "bootdev", current.boot_device ?? "none"];
    if (flags.length > 0) command.push(`options=${flags.join(",")}`);
    await this.ipmitool.run(info, command, options);
  }

  /** `chassis power diag`, as Ironic's ipmitool management. @throws InvalidDriverInfo, IpmiCommandError */
  async injectNmi(node: DriverNode, options: CallOptions = {}): Promise<void> {
    await this.ipmitool.run(parseIpmiDriverInfo(node.driver_info), ["chassis", "power", "diag"], options);
  }

  /** @throws InvalidDriverInfo, IpmiCommandError, DriverError */
  async getBootDevice(
    node: DriverNode,
    options: CallOptions = {},
  ): Promise<{ boot_device: BootDevice | null; persistent: boolean | null }> {
    const info = parseIpmiDriverInfo(node.driver_info);
    return parseBootParam(await this.ipmitool.run(info, ["chassis", "bootparam", "get", "5"], options));
  }
}
