import type { BootDevice } from "../../../shared/states.ts";
import type { BootInterface, DriverNode } from "../interfaces.ts";

/**
 * The redfish type's boot interface as its nodes choose it: `boot_interface` names one of the alternatives
 * (`redfish-virtual-media`), anything else gets the conductor's network boot (iPXE or PXE).
 */
export class BootByNode implements BootInterface {
  constructor(
    private readonly network: BootInterface,
    private readonly others: ReadonlyMap<string, BootInterface>,
  ) {}

  private of(node: DriverNode): BootInterface {
    return (
      (node.boot_interface !== undefined ? this.others.get(node.boot_interface) : undefined) ?? this.network
    );
  }

  async start(): Promise<void> {
    await this.network.start?.();
    for (const boot of this.others.values()) await boot.start?.();
  }

  ramdiskBootDevice(node: DriverNode): BootDevice {
    return this.of(node).ramdiskBootDevice?.(node) ?? "pxe";
  }

  validate(node: DriverNode): void {
    this.of(node).validate(node);
  }

  prepareRamdisk(
    node: DriverNode,
    options: { agentParams: Record<string, string>; signal?: AbortSignal },
  ): Promise<void> {
    return this.of(node).prepareRamdisk(node, options);
  }

  cleanUpRamdisk(node: DriverNode): Promise<void> {
    return this.of(node).cleanUpRamdisk(node);
  }

  prepareInstance(node: DriverNode): Promise<void> {
    return this.of(node).prepareInstance(node);
  }

  cleanUpInstance(node: DriverNode): Promise<void> {
    return this.of(node).cleanUpInstance(node);
  }
}
