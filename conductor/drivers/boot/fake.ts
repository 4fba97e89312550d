import type { BootInterface, DriverNode } from "../interfaces.ts";

/** What FakeBoot last prepared for a node. */
export type FakeBootState =
  { kind: "ramdisk"; agentParams: Record<string, string> } | { kind: "instance" } | { kind: "none" };

/** Ironic's fake-hardware boot: remembers what it was asked to prepare, writes nothing. */
export class FakeBoot implements BootInterface {
  private readonly prepared = new Map<string, FakeBootState>();

  validate(_node: DriverNode): void {}

  async prepareRamdisk(node: DriverNode, options: { agentParams: Record<string, string> }): Promise<void> {
    this.prepared.set(node.uuid, { kind: "ramdisk", agentParams: { ...options.agentParams } });
    return Promise.resolve();
  }

  async cleanUpRamdisk(node: DriverNode): Promise<void> {
    if (this.stateOf(node.uuid).kind === "ramdisk") this.prepared.delete(node.uuid);
    return Promise.resolve();
  }

  async prepareInstance(node: DriverNode): Promise<void> {
    this.prepared.set(node.uuid, { kind: "instance" });
    return Promise.resolve();
  }

  async cleanUpInstance(node: DriverNode): Promise<void> {
    if (this.stateOf(node.uuid).kind === "instance") this.prepared.delete(node.uuid);
    return Promise.resolve();
  }

  stateOf(uuid: string): FakeBootState {
    return this.prepared.get(uuid) ?? { kind: "none" };
  }
}
