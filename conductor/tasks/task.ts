import type { NodeRecord } from "../../shared/resources.ts";
import { driverNodeOf } from "../drivers/driver-node.ts";
import type { Logger } from "../../shared/log.ts";
import { nodeInterfaces, type HardwareType, type NodeInterfaces } from "../drivers/hardware-type.ts";
import type { DriverNode } from "../drivers/interfaces.ts";
import type { DriverTask, TaskDeps, TaskPowerTarget } from "../drivers/task-context.ts";
import { applyPower } from "./power.ts";
import type { ProvisionEvent } from "../states/machine.ts";
import { transitionPatch } from "./transition.ts";

export type { TaskDeps };

/** A node held under its lock: writes only succeed while this conductor still holds the reservation. */
export class Task implements DriverTask {
  private controller = new AbortController();
  /** The plan step running now (`<kind>:<index>`), set by the step runner: agent commands sent from it are
   * recorded so the next owner can ask for them again (in-flight-command.ts). */
  runningStep: string | undefined;

  private holding = true;

  constructor(
    public node: NodeRecord,
    readonly hw: HardwareType,
    readonly deps: TaskDeps,
  ) {}

  /** A task under a shared lock (Ironic's shared=True): reads only; no writes, no power. */
  static shared(node: NodeRecord, hw: HardwareType, deps: TaskDeps): Task {
    const task = new Task(node, hw, deps);
    task.holding = false;
    return task;
  }

  /** True while this task holds the node's exclusive lock (false for a shared task, and once released). */
  get held(): boolean {
    return this.holding;
  }

  /** @internal the TaskManager's: the reservation was given back. */
  released(): void {
    this.holding = false;
  }

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

  /** @throws NodeLocked when the reservation is lost, Error for a shared task (reads only) */
  async update(patch: Partial<NodeRecord>): Promise<NodeRecord> {
    if (!this.held) throw new Error(`node ${this.node.uuid}: writing needs the exclusive lock`);
    this.node = await this.deps.store.updateNode(this.node.uuid, patch, { ifReservedBy: this.deps.holder });
    return this.node;
  }

  /** @throws NodeLocked when the reservation is lost, Error for a shared task (reads only) */
  async mergeInternalInfo(changes: Readonly<Record<string, unknown>>): Promise<NodeRecord> {
    if (!this.held) throw new Error(`node ${this.node.uuid}: writing needs the exclusive lock`);
    this.node = await this.deps.store.updateDriverInternalInfo(this.node.uuid, changes, {
      ifReservedBy: this.deps.holder,
    });
    return this.node;
  }

  /** Moves the node through the state machine and records it. @throws InvalidTransition */
  async fire(event: ProvisionEvent, extra: Partial<NodeRecord> = {}): Promise<NodeRecord> {
    const from = this.node.provision_state;
    const fromSince = this.node.provision_updated_at;
    await this.update({ ...transitionPatch(this.node, event), ...extra });
    this.log.info({ from, event, to: this.node.provision_state }, "provision state changed");
    this.deps.publish({
      type: "provision",
      node: this.node.uuid,
      from,
      // when the node entered `from`: the history's duration of the state it left (1.115)
      from_since: fromSince,
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

  /** Powers the node through the one power path and records the state it reached. @throws DriverError */
  async setPower(target: TaskPowerTarget): Promise<void> {
    await applyPower(this, target);
  }
}
