import type { ConfigDriveContent, ProvisionBody } from "../../shared/api.ts";
import { bootFromVolumeProblem, deployTemplateEntries } from "../tasks/deploy-templates.ts";
import type { Inventory } from "../../shared/inventory.ts";
import type { JsonObject, NodeRecord } from "../../shared/resources.ts";
import type { ProvisionState } from "../../shared/states.ts";
import type { PlannedStep, StepKind } from "../../shared/steps.ts";
import { buildConfigDrive } from "../images/configdrive.ts";
import { NodeLocked, NodeNotFound } from "../db/store.ts";
import {
  nodeInterfaces,
  type DriverRegistry,
  type HardwareType,
  type NodeInterfaces,
} from "../drivers/hardware-type.ts";
import { Invalid, NotFound } from "../errors.ts";
import { POSTED_INSPECTION_DATA } from "../flows/agent-inspect.ts";
import type { Flow } from "../flows/flow.ts";
import type { UrlSigner } from "../images/image-request.ts";
import { prepareInstanceBoot } from "../drivers/boot/instance-boot.ts";
import { rewriteRamdiskBoot } from "../flows/ramdisk.ts";
import { flowFor } from "../flows/select.ts";
import { TRANSIENT_STATES, WAIT_STATES, nextState, verbEvent } from "../states/machine.ts";
import { TaskManager, type NodeLock } from "../tasks/lock.ts";
import { awaitsAgentAnswer, bookkeeping, needsAgent, previewSteps } from "../flows/step-runner.ts";
import { declaredSteps, stepId, validateRequested } from "../tasks/step-plan.ts";
import type { Task, TaskDeps } from "../tasks/task.ts";
import { InvalidTransition } from "../tasks/transition.ts";
import { defineOperation, type OperationContext } from "./operation.ts";

/** PUT /v1/nodes/{id}/states/provision (Ironic's do_node_deploy, do_node_clean, do_provisioning_action...). */
export const PROVISION = defineOperation({ purpose: "provision", shared: false, onOwner: true });

const WAIT_TIMEOUT_KEY: Record<string, keyof TaskDeps["config"]["timeouts"]> = {
  "inspect wait": "inspectWaitS",
  "clean wait": "cleanWaitS",
  "wait call-back": "deployWaitS",
  "rescue wait": "rescueWaitS",
  "service wait": "serviceWaitS",
};

/** The transient state whose flow owns a wait or hold state's clean-up and resume. */
const WORKING_STATE: Partial<Record<ProvisionState, ProvisionState>> = {
  "inspect wait": "inspecting",
  "clean wait": "cleaning",
  "clean hold": "cleaning",
  "wait call-back": "deploying",
  "deploy hold": "deploying",
  "rescue wait": "rescuing",
  "service wait": "servicing",
  "service hold": "servicing",
};

/** Which step plan a wait state belongs to. */
const STEP_KIND: Partial<Record<ProvisionState, StepKind>> = {
  "clean wait": "clean",
  "wait call-back": "deploy",
};

/** A config drive as Ironic stores it: a string (base64 gzipped ISO, or a URL) as given, the JSON form built into an ISO. */
async function configDriveOf(value: string | ConfigDriveContent): Promise<string> {
  return typeof value === "string" ? value : buildConfigDrive(value);
}

/** States whose boot files a new owner writes again after a takeover: the wait states, and active. */
function adoptable(state: ProvisionState): boolean {
  return WAIT_STATES.includes(state) || state === "active";
}

/** The step plan a transient state runs, where its steps may wait on the agent. */
const PLAN_OF_STATE: Partial<Record<ProvisionState, StepKind>> = { cleaning: "clean", deploying: "deploy" };

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
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

  private acquire(node: NodeRecord, purpose: string): Promise<NodeLock> {
    return this.tasks.acquire(node, purpose);
  }

  /** The flow of a state for this task's node; null when none (or the node's interfaces are unknown). */
  private flowOf(task: Task, state: ProvisionState = task.node.provision_state): Flow | null {
    try {
      return flowFor(state, task.interfaces);
    } catch {
      return null;
    }
  }

  /** Background work: its failures land in the state's failure state. */
  private guarded(work: (task: Task) => Promise<void>): (task: Task) => Promise<void> {
    return async (task) => {
      try {
        await work(task);
      } catch (error) {
        await this.fail(task, errorMessage(error));
      }
    };
  }

  private async fail(task: Task, message: string, flow?: Flow | null): Promise<void> {
    task.log.warn({ error: message, state: task.node.provision_state }, "provisioning failed");
    const failingFlow = flow ?? this.flowOf(task);
    try {
      // clean up first: whoever sees the failed state also sees the node powered off
      await failingFlow?.onFail?.(task);
      if (nextState(task.node.provision_state, "fail")) await task.fire("fail", { last_error: message });
      else await task.update({ last_error: message });
    } catch (error) {
      task.log.error({ err: error }, "could not record a failure");
    }
  }

  /** Drives the flow of the node's current transient state until it waits, holds, settles or fails. */
  private async drive(task: Task, entry: "start" | "resume"): Promise<void> {
    let phase = entry;
    for (;;) {
      const flow = this.flowOf(task);
      if (!flow) return;
      let outcome;
      try {
        outcome = phase === "resume" && flow.resume ? await flow.resume(task) : await flow.start(task);
      } catch (error) {
        const handed =
          this.stopped && (await this.handToAgent(task, "conductor stopping").catch(() => false));
        if (handed) return;
        await this.fail(task, errorMessage(error), flow);
        return;
      }
      if (outcome.kind === "wait" || outcome.kind === "hold") {
        await task.fire(outcome.kind);
        return;
      }
      await task.fire(outcome.kind === "chain" ? outcome.event : "done");
      phase = "start";
    }
  }

  /**
   * A clean or deploy step cut off while it waits for its agent's answer (the conductor stops, or died and
   * this one takes over): the node goes to its wait state, and the agent's call-back runs the step again, which
   * asks for the same command and gets its result. False when the node's step waits for no such answer.
   */
  private async handToAgent(task: Task, why: string): Promise<boolean> {
    const state = task.node.provision_state;
    const kind = PLAN_OF_STATE[state];
    if (!kind || !awaitsAgentAnswer(task.node, kind) || !nextState(state, "wait")) return false;
    await task.fire("wait", { target_power_state: null });
    task.log.warn(
      { why, state, waiting: task.node.provision_state },
      "a step waiting on its agent: the agent's call-back resumes it",
    );
    return true;
  }

  /**
   * The operator's steps of a provision request, validated against the node's interfaces before anything is
   * locked or changed (Ironic's rules: clean_steps only and always with `clean`, deploy_steps with
   * `active`/`rebuild`, disable_ramdisk with `clean`). @throws Invalid (400)
   */
  private requestedSteps(node: NodeRecord, body: ProvisionBody): Record<string, unknown> {
    const clean = bookkeeping("clean");
    const deploy = bookkeeping("deploy");
    if (body.clean_steps !== undefined && body.target !== "clean") {
      throw new Invalid('"clean_steps" is only valid when setting target provision state to clean');
    }
    if (body.deploy_steps !== undefined && body.target !== "active" && body.target !== "rebuild") {
      throw new Invalid(
        '"deploy_steps" is only valid when setting target provision state to active or rebuild',
      );
    }
    if (body.disable_ramdisk !== undefined && body.target !== "clean") {
      throw new Invalid('"disable_ramdisk" is only valid when setting target provision state to clean');
    }
    switch (body.target) {
      case "clean": {
        if (body.clean_steps === undefined) {
          throw new Invalid('"clean_steps" is required when setting target provision state to clean');
        }
        const disableRamdisk = body.disable_ramdisk === true;
        const steps = validateRequested(body.clean_steps, declaredSteps(this.interfacesOf(node), "clean"), {
          kind: "clean",
          disableRamdisk,
        });
        return { [clean.requested]: steps, [clean.disableRamdisk]: disableRamdisk };
      }
      case "active":
      case "rebuild": {
        const steps =
          body.deploy_steps === undefined
            ? undefined
            : validateRequested(body.deploy_steps, declaredSteps(this.interfacesOf(node), "deploy"), {
                kind: "deploy",
              });
        return { [deploy.requested]: steps };
      }
      case "provide":
      case "deleted":
        return { [clean.requested]: undefined, [clean.disableRamdisk]: undefined };
      case "manage":
      case "inspect":
      case "abort":
      case "rescue":
      case "unrescue":
      case "adopt":
      case "service":
      case "unhold":
        return {};
    }
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
    const steps = this.requestedSteps(node, body);
    if (body.target === "active" || body.target === "rebuild") {
      const volume = await bootFromVolumeProblem(this.deps.store, node);
      if (volume !== null) throw new Invalid(volume);
      const deploySteps = declaredSteps(this.interfacesOf(node), "deploy");
      Object.assign(steps, await deployTemplateEntries(this.deps.store, node, deploySteps));
    }
    const configdrive = body.configdrive === undefined ? undefined : await configDriveOf(body.configdrive);
    const lock = await this.acquire(node, body.target);
    await lock.run(async (task) => {
      const extra: Partial<NodeRecord> = {
        last_error: null,
        driver_internal_info: { ...task.node.driver_internal_info, ...steps },
      };
      if (configdrive !== undefined) extra.instance_info = { ...task.node.instance_info, configdrive };
      await task.fire(event, extra);
      // unhold returns to a wait state: the agent's next call-back (or, with no agent needed, we) resume
      if (body.target !== "unhold") lock.spawnAfter(this.guarded((t) => this.drive(t, "start")));
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
    const lock = await this.acquire(node, "abort");
    await lock.run(async (task) => {
      await this.flowOf(task, WORKING_STATE[node.provision_state] ?? node.provision_state)?.onFail?.(task);
      const step = node.clean_step as Partial<PlannedStep>;
      const message =
        node.provision_state === "clean wait" || node.provision_state === "clean hold"
          ? `By request, the clean operation was aborted${step.step ? ` during or after the completion of step "${stepId({ interface: step.interface ?? "deploy", step: step.step })}"` : ""}`
          : `${node.provision_state} aborted by operator`;
      await task.fire("abort", { last_error: message });
    });
  }

  /** Continues a waiting node's flow under a fresh lock (`resume` moves it back to its transient state). */
  private async resume(node: NodeRecord): Promise<void> {
    const lock = await this.acquire(node, "resume");
    await lock.run(async (task) => {
      await task.fire("resume");
      lock.spawnAfter(this.guarded((t) => this.drive(t, "resume")));
    });
  }

  /**
   * POST /v1/continue_inspection (Ironic 1.84): a ramdisk other than Anvil's agent posted the inspection data
   * of a node in `inspect wait`. The data is stored and the inspection continues from it, as when the agent
   * answers get_inventory. @throws NotFound when the node left `inspect wait`, NodeLocked (409)
   */
  async continueInspection(node: NodeRecord, data: { inventory: Inventory; plugin_data: JsonObject }) {
    const lock = await this.acquire(node, "continue inspection");
    return lock.run(async (task) => {
      if (task.node.provision_state !== "inspect wait") throw new NotFound("Resource could not be found.");
      await this.deps.store.saveInventory(task.node.uuid, data);
      const internal = { ...task.node.driver_internal_info, [POSTED_INSPECTION_DATA]: true };
      await task.fire("resume", { driver_internal_info: internal });
      lock.spawnAfter(this.guarded((t) => this.drive(t, "resume")));
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

  /** The steps a node runs next (Anvil's GET /v1/nodes/{id}/steps): its current plan, else a new one's. */
  stepsOf(node: NodeRecord, kind: StepKind): ReturnType<typeof previewSteps> {
    return previewSteps({ node, interfaces: this.interfacesOf(node) }, kind);
  }

  /**
   * After a restart: release the locks this conductor left and fail the work that was in flight
   * (wait and hold states stay: their agents call back, the operator unholds, or their timeout fails them).
   */
  async recover(): Promise<string[]> {
    const failed: string[] = [];
    for (const uuid of await this.deps.store.releaseAllReservations(this.deps.holder)) {
      if (await this.abandon(uuid, "The conductor restarted")) failed.push(uuid);
    }
    return failed;
  }

  /**
   * Takeover: a dead conductor's lock on a node this one now owns is freed, and its in-flight work settled
   * by the same rules as a restart. Returns whether the node was failed.
   */
  async takeOver(uuid: string, deadHolder: string, cause: string): Promise<boolean> {
    await this.deps.store.releaseNode(uuid, deadHolder);
    return this.abandon(uuid, cause);
  }

  /**
   * Takeover of boot files a conductor now gone wrote (they lived on its disk), as Ironic's takeover does:
   * - a node waiting for its agent (Ironic keeps wait states across a takeover) gets its ramdisk boot
   *   configuration written again here, so a reboot lands on this conductor, and its wait timer restarts; the
   *   agent's call-back (here, or redirected here) resumes the flow. The agent token is kept.
   * - an `active` node gets its instance boot configuration written again (Ironic's prepare_instance).
   * Nothing is powered. Returns false when the node is locked, gone or in neither case any more.
   */
  async adoptBoot(uuid: string): Promise<boolean> {
    const node = await this.deps.store.getNode(uuid);
    if (!node || !adoptable(node.provision_state)) return false;
    let lock: NodeLock;
    try {
      lock = await this.acquire(node, "takeover");
    } catch (error) {
      if (error instanceof NodeLocked || error instanceof NodeNotFound) return false;
      throw error;
    }
    const adopted = await lock.run(async (task) => {
      const state = task.node.provision_state;
      if (WAIT_STATES.includes(state)) await rewriteRamdiskBoot(task);
      else if (state === "active") await prepareInstanceBoot(task);
      else return false;
      return true;
    });
    // an agent that reconnected here before the takeover saw the node as ours: its call-back resumes now
    if (adopted && this.deps.agents.isConnected(uuid)) await this.agentConnected(uuid);
    return adopted;
  }

  /**
   * Settles an unlocked node's abandoned transient state and clears a pending power change. A clean or deploy
   * step that was waiting for the agent's answer to a command goes to its wait state: the agent keeps working
   * and keeps its result, and its call-back here runs the step again, which asks for the same command and gets
   * that result (Ironic keeps such nodes in their wait state across a takeover too); if the agent never calls
   * back, the wait's timeout fails the node. Any other transient state is failed. Wait and hold states stay
   * (their agents call back, the operator unholds, or their timeout fails them). Returns whether it failed.
   */
  private async abandon(uuid: string, cause: string): Promise<boolean> {
    const node = await this.deps.store.getNode(uuid);
    const inFlight = node !== null && TRANSIENT_STATES.includes(node.provision_state);
    if (!node || (!inFlight && node.target_power_state === null)) return false;
    let lock: NodeLock;
    try {
      lock = await this.acquire(node, "takeover");
    } catch (error) {
      if (error instanceof NodeLocked) return false; // someone else got to it first
      throw error;
    }
    let outcome = "unchanged" as "failed" | "waiting" | "unchanged";
    await lock.run(async (task) => {
      if (inFlight && (await this.handToAgent(task, cause))) {
        outcome = "waiting";
        return;
      }
      const message = `${cause} while the node was in "${node.provision_state}"; the operation was abandoned.`;
      await task.update({ target_power_state: null, last_error: message });
      if (!inFlight) return;
      await this.fail(task, message);
      outcome = "failed";
    });
    // an agent already connected here (it reconnected before the takeover) calls back now
    if (outcome === "waiting" && this.deps.agents.isConnected(uuid)) await this.agentConnected(uuid);
    return outcome === "failed";
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
        let lock: NodeLock;
        try {
          lock = await this.acquire(node, "timeout");
        } catch (error) {
          if (error instanceof NodeLocked || error instanceof NodeNotFound) continue;
          throw error;
        }
        await lock.run(async (task) => {
          await this.fail(
            task,
            `Timeout reached while waiting for callback for node ${node.uuid} in "${state}"`,
            this.flowOf(task, WORKING_STATE[state] ?? state),
          );
          failed.push(node.uuid);
        });
      }
    }
    return failed;
  }
}
