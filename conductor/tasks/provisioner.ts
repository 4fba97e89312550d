import type { ConfigDriveContent, ProvisionBody } from "../../shared/api.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import type { PowerTarget, ProvisionState } from "../../shared/states.ts";
import { badRequest } from "../api/errors.ts";
import { buildConfigDrive } from "../images/configdrive.ts";
import { NodeLocked, NodeNotFound } from "../db/store.ts";
import type { DriverRegistry, HardwareType } from "../drivers/hardware-type.ts";
import type { Flow } from "../flows/flow.ts";
import type { UrlSigner } from "../flows/image-request.ts";
import { flowFor } from "../flows/select.ts";
import { TRANSIENT_STATES, WAIT_STATES, nextState, verbEvent } from "../states/machine.ts";
import { Task, type TaskDeps } from "./task.ts";
import { InvalidTransition } from "./transition.ts";

const WAIT_TIMEOUT_KEY: Record<string, keyof TaskDeps["config"]["timeouts"]> = {
  "inspect wait": "inspectWaitS",
  "clean wait": "cleanWaitS",
  "wait call-back": "deployWaitS",
  "rescue wait": "rescueWaitS",
  "service wait": "serviceWaitS",
};

/** A config drive as Ironic stores it: a string (base64 gzipped ISO, or a URL) as given, the JSON form built into an ISO. */
async function configDriveOf(value: string | ConfigDriveContent): Promise<string> {
  return typeof value === "string" ? value : buildConfigDrive(value);
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The one path every provision and power change takes: lock the node, transition (pure), persist,
 * run the work in the background, release the lock when the work settles.
 */
export class Provisioner {
  private readonly running = new Map<string, { task: Task; done: Promise<void> }>();
  /** Nodes whose agent called back while our own work held the lock (an agent may dial in before its node
   * reaches the wait state): resumed once the lock is released. */
  private readonly resumeAfterRelease = new Set<string>();

  constructor(
    private readonly deps: TaskDeps,
    private readonly drivers: DriverRegistry,
    private readonly sign: UrlSigner,
  ) {}

  private hardware(node: NodeRecord): HardwareType {
    const hw = this.drivers.get(node.driver);
    if (!hw) throw badRequest(`No conductor service registered which supports driver ${node.driver}.`);
    return hw;
  }

  /** Waits until no work is running (tests, shutdown). */
  async settle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.values()].map((r) => r.done));
  }

  /** Cancels running work (shutdown); the nodes are failed or resumed by the next start's recovery. */
  abortAll(reason: string): void {
    for (const { task } of this.running.values()) task.abort(reason);
  }

  private async lock(node: NodeRecord): Promise<Task> {
    const reserved = await this.deps.store.reserveNode(node.uuid, this.deps.holder);
    return new Task(reserved, this.hardware(reserved), this.deps);
  }

  private async release(task: Task): Promise<void> {
    await this.deps.store.releaseNode(task.node.uuid, this.deps.holder);
  }

  /** Runs `work` in the background under the task's lock; failures land in the state's failure state. */
  private spawn(task: Task, work: (task: Task) => Promise<void>): void {
    const done = (async () => {
      try {
        await work(task);
      } catch (error) {
        await this.fail(task, errorMessage(error));
      } finally {
        this.running.delete(task.node.uuid);
        await this.release(task).catch((error: unknown) => task.log.error({ err: error }, "release failed"));
        if (this.resumeAfterRelease.delete(task.node.uuid)) {
          await this.agentConnected(task.node.uuid).catch((error: unknown) =>
            task.log.error({ err: error }, "agent call-back failed"),
          );
        }
      }
    })();
    this.running.set(task.node.uuid, { task, done });
  }

  private async fail(task: Task, message: string, flow?: Flow | null): Promise<void> {
    task.log.warn({ error: message, state: task.node.provision_state }, "provisioning failed");
    const failingFlow = flow ?? flowFor(task.node, this.sign);
    try {
      // clean up first: whoever sees the failed state also sees the node powered off
      await failingFlow?.onFail?.(task);
      if (nextState(task.node.provision_state, "fail")) await task.fire("fail", { last_error: message });
      else await task.update({ last_error: message });
    } catch (error) {
      task.log.error({ err: error }, "could not record a failure");
    }
  }

  /** Drives the flow of the node's current transient state until it waits, settles or fails. */
  private async drive(task: Task, entry: "start" | "resume"): Promise<void> {
    let phase = entry;
    for (;;) {
      const flow = flowFor(task.node, this.sign);
      if (!flow) return;
      let outcome;
      try {
        outcome = phase === "resume" && flow.resume ? await flow.resume(task) : await flow.start(task);
      } catch (error) {
        await this.fail(task, errorMessage(error), flow);
        return;
      }
      if (outcome.kind === "wait") {
        await task.fire("wait");
        return;
      }
      await task.fire(outcome.kind === "chain" ? outcome.event : "done");
      phase = "start";
    }
  }

  /**
   * PUT /v1/nodes/{id}/states/provision. Validates and records the transition synchronously
   * (400 for an illegal verb, 409 when locked), then works in the background.
   */
  async provision(node: NodeRecord, body: ProvisionBody): Promise<void> {
    const event = verbEvent(body.target);
    if (nextState(node.provision_state, event) === null) throw new InvalidTransition(body.target, node);
    if (body.target === "abort") return this.abort(node);
    if ((body.target === "active" || body.target === "rebuild") && node.maintenance) {
      throw badRequest(`Node ${node.uuid} is in maintenance mode; it cannot be deployed.`);
    }
    const configdrive = body.configdrive === undefined ? undefined : await configDriveOf(body.configdrive);
    const task = await this.lock(node);
    try {
      const extra: Partial<NodeRecord> = { last_error: null };
      if (configdrive !== undefined) extra.instance_info = { ...task.node.instance_info, configdrive };
      await task.fire(event, extra);
    } catch (error) {
      await this.release(task);
      throw error;
    }
    if (body.target === "unhold") {
      // back to a wait state: the agent's next call-back resumes
      await this.release(task);
      if (this.deps.agents.isConnected(node.uuid)) await this.agentConnected(node.uuid);
      return;
    }
    this.spawn(task, (t) => this.drive(t, "start"));
  }

  private async abort(node: NodeRecord): Promise<void> {
    const task = await this.lock(node);
    try {
      await flowFor(
        { ...task.node, provision_state: this.stateBefore(node.provision_state) },
        this.sign,
      )?.onFail?.(task);
      await task.fire("abort", { last_error: `${node.provision_state} aborted by operator` });
    } finally {
      await this.release(task);
    }
  }

  /** The transient state a wait state belongs to (its flow owns the clean-up). */
  private stateBefore(state: ProvisionState): ProvisionState {
    return nextState(state, "resume") ?? state;
  }

  /** An agent called back: if its node waits for it, continue that node's flow. */
  async agentConnected(uuid: string, options: { attempt?: number } = {}): Promise<void> {
    if (this.running.has(uuid)) {
      // our own work holds the lock (the ramdisk is still being prepared, or a power change): the node is
      // looked at again when it lets go
      this.resumeAfterRelease.add(uuid);
      return;
    }
    const node = await this.deps.store.getNode(uuid);
    if (!node || !WAIT_STATES.includes(node.provision_state)) return;
    let task: Task;
    try {
      task = await this.lock(node);
    } catch (error) {
      if (!(error instanceof NodeLocked)) throw error;
      // another holder: try again shortly while the agent is still there
      const attempt = (options.attempt ?? 0) + 1;
      if (attempt <= 60 && this.deps.agents.isConnected(uuid)) {
        setTimeout(() => void this.agentConnected(uuid, { attempt }).catch(() => undefined), 1000).unref();
      }
      return;
    }
    try {
      await task.fire("resume");
    } catch (error) {
      await this.release(task);
      throw error;
    }
    this.spawn(task, (t) => this.drive(t, "resume"));
  }

  /** PUT /v1/nodes/{id}/states/power: 202 now, the BMC in the background. */
  async power(node: NodeRecord, target: PowerTarget): Promise<void> {
    const task = await this.lock(node);
    const desired = target === "power off" || target === "soft power off" ? "power off" : "power on";
    try {
      await task.update({ target_power_state: target, last_error: null });
    } catch (error) {
      await this.release(task);
      throw error;
    }
    this.spawn(task, async (t) => {
      try {
        const dn = await t.driverNode();
        const soft = target.startsWith("soft");
        if (target === "rebooting" || target === "soft rebooting")
          await t.hw.power.reboot(dn, { soft, signal: t.signal });
        else await t.hw.power.setPowerState(dn, desired, { soft, signal: t.signal });
        await t.update({ power_state: desired, target_power_state: null });
        this.deps.publish({ type: "power", node: t.node.uuid, power_state: desired });
      } catch (error) {
        await t.update({
          target_power_state: null,
          last_error: `Failed to change power state to '${target}': ${errorMessage(error)}`,
        });
      }
    });
  }

  /**
   * Takeover: a dead conductor's lock on a node this one now owns is freed, and its in-flight work settled
   * by the same rules as a restart. Returns whether the node was failed.
   */
  async takeOver(uuid: string, deadHolder: string, cause: string): Promise<boolean> {
    await this.deps.store.releaseNode(uuid, deadHolder);
    return this.abandon(uuid, cause);
  }

  /** Fails an unlocked node's abandoned transient state (and clears a pending power change). */
  private async abandon(uuid: string, cause: string): Promise<boolean> {
    const node = await this.deps.store.getNode(uuid);
    const inFlight = node !== null && TRANSIENT_STATES.includes(node.provision_state);
    if (!node || (!inFlight && node.target_power_state === null)) return false;
    let task: Task;
    try {
      task = await this.lock(node);
    } catch (error) {
      if (error instanceof NodeLocked) return false; // someone else got to it first
      throw error;
    }
    try {
      const message = `${cause} while the node was in "${node.provision_state}"; the operation was abandoned.`;
      await task.update({ target_power_state: null, last_error: message });
      if (!inFlight) return false;
      await this.fail(task, message);
      return true;
    } finally {
      await this.release(task);
    }
  }

  /** Fails nodes that waited for their agent longer than their state's timeout. */
  async failTimedOut(
    now = Date.now(),
    isMine: (node: NodeRecord) => boolean = () => true,
  ): Promise<string[]> {
    const failed: string[] = [];
    for (const state of WAIT_STATES) {
      const limitS = this.deps.config.timeouts[WAIT_TIMEOUT_KEY[state] ?? "deployWaitS"];
      for (const node of await this.deps.store.listNodes({ provision_state: state }, {})) {
        const since = Date.parse(node.provision_updated_at ?? node.updated_at ?? node.created_at);
        if (now - since < limitS * 1000 || !isMine(node)) continue;
        let task: Task;
        try {
          task = await this.lock(node);
        } catch (error) {
          if (error instanceof NodeLocked || error instanceof NodeNotFound) continue;
          throw error;
        }
        try {
          await this.fail(
            task,
            `Timeout reached while waiting for callback for node ${node.uuid} in "${state}"`,
            flowFor({ ...task.node, provision_state: this.stateBefore(state) }, this.sign),
          );
          failed.push(node.uuid);
        } finally {
          await this.release(task);
        }
      }
    }
    return failed;
  }
}
