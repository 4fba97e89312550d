import type { ProvisionBody } from "../../shared/api.ts";
import type { Inventory } from "../../shared/inventory.ts";
import type { JsonObject, NodeRecord } from "../../shared/resources.ts";
import type { ProvisionState } from "../../shared/states.ts";
import type { PlannedStep, StepKind } from "../../shared/steps.ts";
import { NodeLocked, NodeNotFound } from "../db/store.ts";
import {
  nodeInterfaces,
  type DriverRegistry,
  type HardwareType,
  type NodeInterfaces,
} from "../drivers/hardware-type.ts";
import { Conflict, Invalid, NotFound } from "../errors.ts";
import { POSTED_INSPECTION_DATA } from "../flows/agent-inspect.ts";
import { WORKING_STATE, driveFlow, failWork, flowOf, guarded } from "../flows/drive.ts";
import { resumeHandedBackWrite } from "../drivers/deploy/write-resume.ts";
import { needsAgent, previewSteps } from "../flows/step-runner.ts";
import type { UrlSigner } from "../images/image-request.ts";
import { WAIT_STATES, nextState, verbEvent } from "../states/machine.ts";
import { bootFromVolumeProblem, deployTemplateEntries } from "../tasks/deploy-templates.ts";
import { TaskManager, type AcquireOptions, type NodeLock } from "../tasks/lock.ts";
import { declaredSteps, stepId } from "../tasks/step-plan.ts";
import type { Task, TaskDeps } from "../tasks/task.ts";
import { InvalidTransition } from "../tasks/transition.ts";
import { defineOperation, type OperationContext } from "./operation.ts";
import { configDriveOf, requestedSteps } from "./provision-request.ts";

/** A client's request waits out a lock that is being released (lock.ts's AcquireOptions). */
const REQUEST: AcquireOptions = { wait: true };

/** PUT /v1/nodes/{id}/states/provision (Ironic's do_node_deploy, do_node_clean, do_provisioning_action...). */
export const PROVISION = defineOperation({ purpose: "provision", shared: false, onOwner: true });

/** Which step plan a wait state belongs to. */
const STEP_KIND: Partial<Record<ProvisionState, StepKind>> = {
  "clean wait": "clean",
  "wait call-back": "deploy",
  "service wait": "service",
};

/**
 * What a deploy checks under the node's lock, as Ironic's do_node_deploy does inside task_manager.acquire:
 * no boot from a volume, and the steps of the deploy templates named by the node's instance traits. Read
 * from the node as reserved, so a trait or volume change that lands between the API's read and the lock
 * cannot slip by (node changes take the same lock). Returns the template entries to record with the
 * transition: the deploy plans from those, not from the templates as they may be edited later.
 * @throws Invalid (400)
 */
async function deployChecks(task: Task): Promise<Record<string, unknown>> {
  const { store } = task.deps;
  const volume = await bootFromVolumeProblem(store, task.node);
  if (volume !== null) throw new Invalid(volume);
  return deployTemplateEntries(store, task.node, declaredSteps(task.interfaces, "deploy"));
}

/**
 * The one path every provision change takes: lock the node (the TaskManager's handle), transition (pure),
 * persist, run the work in the background, release the lock when the work settles. It is also the context the
 * other operations (power, boot device, ...) lock nodes through: one TaskManager per conductor.
 */
export class Provisioner implements OperationContext {
  readonly tasks: TaskManager;
  readonly deps: TaskDeps;
  /** Nodes whose agent called back while our own work held the lock (an agent may dial in before its node
   * reaches the wait state): resumed once the lock is released. */
  private readonly resumeAfterRelease = new Set<string>();
  private stopped = false;

  constructor(
    deps: Omit<TaskDeps, "sign">,
    readonly drivers: DriverRegistry,
    sign: UrlSigner,
  ) {
    this.deps = { ...deps, sign };
    this.tasks = new TaskManager(
      this.deps,
      (node) => this.hardware(node),
      async (uuid) => {
        if (this.resumeAfterRelease.delete(uuid)) await this.agentConnected(uuid);
      },
    );
  }

  private hardware(node: NodeRecord): HardwareType {
    const hw = this.drivers.get(node.driver);
    if (!hw) throw new Invalid(`No conductor service registered which supports driver ${node.driver}.`);
    return hw;
  }

  private interfacesOf(node: NodeRecord): NodeInterfaces {
    return nodeInterfaces(this.hardware(node), node);
  }

  /** Is work of this conductor running on the node (it holds the node's lock)? */
  isWorking(uuid: string): boolean {
    return this.tasks.isRunning(uuid);
  }

  /** Waits until no work is running (tests, shutdown). */
  settle(): Promise<void> {
    return this.tasks.settle();
  }

  /** Cancels running work (shutdown); the nodes are failed or resumed by the next start's recovery. */
  abortAll(reason: string): void {
    this.tasks.abortAll(reason);
  }

  /**
   * The conductor is stopping: from now on, a clean or deploy step whose agent command is cut off (the gateway
   * closes without cancelling it on the agent) moves its node to the wait state instead of failing it. The
   * agent finishes the work and calls back to whichever conductor owns the node next, which asks for the same
   * command and gets its result: restarting a conductor does not fail the deploys its agents are running.
   */
  stopping(): void {
    this.stopped = true;
  }

  /**
   * The node's exclusive lock for `purpose`; `wait` for a request's (lock.ts's AcquireOptions).
   * @throws NodeLocked (409), NodeNotFound
   */
  acquire(node: NodeRecord, purpose: string, options: AcquireOptions = {}): Promise<NodeLock> {
    return this.tasks.acquire(node, purpose, options);
  }

  /** The node's lock, or undefined when other work holds it or the node is gone (background sweeps). */
  async tryAcquire(node: NodeRecord, purpose: string): Promise<NodeLock | undefined> {
    try {
      return await this.tasks.acquire(node, purpose);
    } catch (error) {
      if (error instanceof NodeLocked || error instanceof NodeNotFound) return undefined;
      throw error;
    }
  }

  /** Drives the node's flow in the background once the lock's holder lets go of it. */
  private drive(entry: "start" | "resume"): (task: Task) => Promise<void> {
    return guarded((t) => driveFlow(t, entry, () => this.stopped));
  }

  /**
   * PUT /v1/nodes/{id}/states/provision. Validates and records the transition synchronously
   * (400 for an illegal verb or bad steps, 409 when locked), then works in the background.
   */
  async provision(node: NodeRecord, body: ProvisionBody): Promise<void> {
    if (body.target === "abort" && this.tasks.isRunning(node.uuid)) return this.abortRunningStep(node);
    const event = verbEvent(body.target);
    if (nextState(node.provision_state, event) === null) throw new InvalidTransition(body.target, node);
    if (body.target === "abort") return this.abort(node);
    if ((body.target === "active" || body.target === "rebuild") && node.maintenance) {
      throw new Invalid(`Node ${node.uuid} is in maintenance mode; it cannot be deployed.`);
    }
    const steps = requestedSteps(() => this.interfacesOf(node), body);
    const lock = await this.acquire(node, body.target, REQUEST);
    await lock.run(async (task) => {
      const configdrive =
        body.configdrive === undefined
          ? undefined
          : await configDriveOf(this.deps.store, task.node, body.configdrive);
      if (body.target === "active" || body.target === "rebuild")
        Object.assign(steps, await deployChecks(task));
      const extra: Partial<NodeRecord> = {
        last_error: null,
        driver_internal_info: { ...task.node.driver_internal_info, ...steps },
      };
      if (configdrive !== undefined) extra.instance_info = { ...task.node.instance_info, configdrive };
      await task.fire(event, extra);
      // unhold returns to a wait state: the agent's next call-back (or, with no agent needed, we) resume
      if (body.target !== "unhold") lock.spawnAfter(this.drive("start"));
    });
    if (body.target === "unhold") await this.resumeAfterUnhold(node.uuid);
  }

  /** After unhold: resume now when the agent is there or the plan needs none; else its call-back resumes. */
  private async resumeAfterUnhold(uuid: string): Promise<void> {
    if (this.deps.agents.isConnected(uuid)) return this.agentConnected(uuid);
    const node = await this.deps.store.getNode(uuid);
    const kind = node ? STEP_KIND[node.provision_state] : undefined;
    if (!node || !kind) return;
    if (!needsAgent({ node, interfaces: this.interfacesOf(node) }, kind)) await this.resume(node);
  }

  /**
   * Abort while our own work runs a step (the agent's step runs under the lock, in "cleaning"): an abortable
   * step is cancelled now; any other finishes first and the cleaning stops after it (Ironic's abort_after).
   */
  private async abortRunningStep(node: NodeRecord): Promise<void> {
    const task = this.tasks.runningTask(node.uuid);
    if (!task || task.node.provision_state !== "cleaning") throw new InvalidTransition("abort", node);
    const step = task.node.clean_step as Partial<PlannedStep>;
    if (step.step === undefined) throw new InvalidTransition("abort", node);
    const id = stepId({ interface: step.interface ?? "deploy", step: step.step });
    if (step.abortable === true) {
      task.abort(`By request, the clean operation was aborted during step "${id}"`);
      return;
    }
    await task.update({ clean_step: { ...step, abort_after: true } });
  }

  private async abort(node: NodeRecord): Promise<void> {
    if (node.provision_state.startsWith("service ")) return this.abortService(node);
    const lock = await this.acquire(node, "abort", REQUEST);
    await lock.run(async (task) => {
      await flowOf(task, WORKING_STATE[node.provision_state] ?? node.provision_state)?.onFail?.(task);
      const step = node.clean_step as Partial<PlannedStep>;
      const message =
        node.provision_state === "clean wait" || node.provision_state === "clean hold"
          ? `By request, the clean operation was aborted${step.step ? ` during or after the completion of step "${stepId({ interface: step.interface ?? "deploy", step: step.step })}"` : ""}`
          : `${node.provision_state} aborted by operator`;
      await task.fire("abort", { last_error: message });
    });
  }

  /**
   * Abort of servicing (Ironic's _do_abort and do_node_service_abort): from `service wait` or `service hold`
   * the node fails and is aborted on to `active`, back on its instance; from `service failed` (already torn
   * down) it returns to `active`, unless in maintenance. A step that cannot be interrupted is marked to stop
   * after it completes instead. @throws Conflict (409)
   */
  private async abortService(node: NodeRecord): Promise<void> {
    const lock = await this.acquire(node, "abort", REQUEST);
    await lock.run(async (task) => {
      const step = task.node.service_step as Partial<PlannedStep>;
      if (task.node.provision_state === "service failed") {
        if (task.node.maintenance)
          throw new Conflict(
            `Can not abort service on node "${node.uuid}" while it is in maintenance mode. Please remove the node from maintenance prior to issuing the request to abort the service operation.`,
          );
        await task.fire("abort", { last_error: "By request, the service operation was aborted" });
        return;
      }
      if (step.step !== undefined && step.abortable !== true) {
        await task.update({ service_step: { ...step, abort_after: true } });
        return;
      }
      const during = step.step
        ? ` during or after the completion of step "${stepId({ interface: step.interface ?? "deploy", step: step.step })}"`
        : "";
      await flowOf(task, "servicing")?.onFail?.(task);
      await task.fire("fail");
      await task.fire("abort", { last_error: `By request, the service operation was aborted${during}` });
    });
  }

  /** Continues a waiting node's flow under a fresh lock (`resume` moves it back to its transient state). */
  private async resume(node: NodeRecord): Promise<void> {
    const lock = await this.acquire(node, "resume");
    await lock.run(async (task) => {
      await task.fire("resume");
      lock.spawnAfter(this.drive("resume"));
    });
  }

  /**
   * POST /v1/continue_inspection (Ironic 1.84): a ramdisk other than Anvil's agent posted the inspection data
   * of a node in `inspect wait`. The data is stored and the inspection continues from it, as when the agent
   * answers get_inventory. @throws NotFound when the node left `inspect wait`, NodeLocked (409)
   */
  async continueInspection(node: NodeRecord, data: { inventory: Inventory; plugin_data: JsonObject }) {
    const lock = await this.acquire(node, "continue inspection", REQUEST);
    return lock.run(async (task) => {
      if (task.node.provision_state !== "inspect wait") throw new NotFound("Resource could not be found.");
      await this.deps.store.saveInventory(task.node.uuid, data);
      const internal = { ...task.node.driver_internal_info, [POSTED_INSPECTION_DATA]: true };
      await task.fire("resume", { driver_internal_info: internal });
      lock.spawnAfter(this.drive("resume"));
      return task.node;
    });
  }

  /** An agent called back: if its node waits for it, continue that node's flow. */
  async agentConnected(uuid: string, options: { attempt?: number } = {}): Promise<void> {
    if (this.tasks.isRunning(uuid)) {
      // our own work holds the lock (the ramdisk is still being prepared, a step runs, a power change): the
      // node is looked at again when it lets go
      this.resumeAfterRelease.add(uuid);
      return;
    }
    const node = await this.deps.store.getNode(uuid);
    if (!node || !WAIT_STATES.includes(node.provision_state)) return;
    try {
      await this.resume(node);
    } catch (error) {
      if (!(error instanceof NodeLocked)) throw error;
      // another holder: try again shortly while the agent is still there
      const attempt = (options.attempt ?? 0) + 1;
      if (attempt <= 60 && this.deps.agents.isConnected(uuid)) {
        setTimeout(() => void this.agentConnected(uuid, { attempt }).catch(() => undefined), 1000).unref();
      }
    }
  }

  /**
   * gateway.onRebooted: a new boot of a node with no agent session and no command waiting here dialled in.
   * A write_image a restart or a takeover handed back to its agent is resumed (write-resume.ts); past the
   * resumes allowed, the deploy fails now rather than at its wait timeout. Anything else is left alone.
   */
  async agentRebooted(
    uuid: string,
    bootId: string,
    /** Whether this conductor owns the node (the ring's answer): only the owner acts. */
    isMine: (node: NodeRecord) => boolean,
  ): Promise<void> {
    const node = await this.deps.store.getNode(uuid);
    // a tokenless hello may reach any conductor of the cluster: the node's owner acts on it
    if (!node || node.provision_state !== "wait call-back" || !isMine(node)) return;
    const lock = await this.tryAcquire(node, "resume write_image");
    if (!lock) return;
    await lock.run(async (task) => {
      const outcome = await resumeHandedBackWrite(task, bootId);
      if (outcome === "exhausted")
        await failWork(
          task,
          `the node booted again while write_image ran, more often than the ${this.deps.config.deploy.maxResumes} resumes allowed; the image was not written`,
        );
    });
  }

  /** The steps a node runs next (Anvil's GET /v1/nodes/{id}/steps): its current plan, else a new one's. */
  stepsOf(node: NodeRecord, kind: StepKind): ReturnType<typeof previewSteps> {
    return previewSteps({ node, interfaces: this.interfacesOf(node) }, kind);
  }
}
