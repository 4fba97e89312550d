import type { NodeRecord } from "../../shared/resources.ts";
import { driverNodeOf } from "../drivers/driver-node.ts";
import type { Logger } from "../../shared/log.ts";
import { nodeInterfaces, type HardwareType, type NodeInterfaces } from "../drivers/hardware-type.ts";
import type { DriverNode } from "../drivers/interfaces.ts";
import type { DriverTask, TaskDeps } from "../drivers/task-context.ts";
import type { ProvisionEvent } from "../states/machine.ts";
import { transitionPatch } from "./transition.ts";

export type { TaskDeps };

/** A node held under its lock: writes only succeed while this conductor still holds the reservation. */
export class Task implements DriverTask {
  private controller = new AbortController();
  /** The plan step running now (`<kind>:<index>`), set by the step runner: agent commands sent from it are
   * recorded so the next owner can ask for them again (in-flight-command.ts). */
  runningStep: string | undefined;

  constructor(
    public node: NodeRecord,
    readonly hw: HardwareType,
    readonly deps: TaskDeps,
  ) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  abort(reason: string): void {
    this.controller.abort(new Error(reason));
  }

  /** The node's deploy, inspect and raid interfaces, as its *_interface fields choose. @throws Invalid */
  get interfaces(): NodeInterfaces {
    return nodeInterfaces(this.hw, this.node);
  }

  get log(): Logger {
    return this.deps.logger.child({ node: this.node.uuid });
  }

  async update(patch: Partial<NodeRecord>): Promise<NodeRecord> {
    this.node = await this.deps.store.updateNode(this.node.uuid, patch, { ifReservedBy: this.deps.holder });
    return this.node;
  }

  /** Moves the node through the state machine and records it. @throws InvalidTransition */
  async fire(event: ProvisionEvent, extra: Partial<NodeRecord> = {}): Promise<NodeRecord> {
    const from = this.node.provision_state;
    await this.update({ ...transitionPatch(this.node, event), ...extra });
    this.log.info({ from, event, to: this.node.provision_state }, "provision state changed");
    this.deps.publish({
      type: "provision",
      node: this.node.uuid,
      from,
      event,
      provision_state: this.node.provision_state,
      target_provision_state: this.node.target_provision_state,
    });
    return this.node;
  }

  /** A snapshot for driver calls, with the node's ports. */
  driverNode(): Promise<DriverNode> {
    return driverNodeOf(this.deps.store, this.node);
  }

  /** Powers the node and records the state it reached. */
  async setPower(target: "power on" | "power off" | "reboot"): Promise<void> {
    const dn = await this.driverNode();
    if (target === "reboot") await this.hw.power.reboot(dn, { signal: this.signal });
    else await this.hw.power.setPowerState(dn, target, { signal: this.signal });
    await this.update({
      power_state: target === "power off" ? "power off" : "power on",
      target_power_state: null,
    });
  }
}
