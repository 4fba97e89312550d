import { COMMAND_NAMES } from "../../shared/protocol.ts";
import { templateStepsOf, withTemplateSteps } from "../tasks/deploy-templates.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import {
  PlannedStepSchema,
  type PlannedStep,
  type RequestedStep,
  type StepKind,
} from "../../shared/steps.ts";
import type { Step } from "../drivers/step.ts";
import { DONE, HOLD, WAIT, type FlowOutcome } from "./flow.ts";
import { bootIntoRamdisk, canFastTrack } from "./ramdisk.ts";
import {
  automatedPlan,
  declaredSteps,
  deployPlan,
  findStep,
  mergeAgentSteps,
  parseReportedSteps,
  stepId,
  validateRequested,
} from "../tasks/step-plan.ts";
import { IN_FLIGHT_KEY, inFlightFor, stepMarker } from "../drivers/in-flight-command.ts";
import type { Task } from "../tasks/task.ts";

/**
 * The one step runner (Ironic's do_next_clean_step / do_next_deploy_step / do_next_service_step): runs a
 * node's clean, deploy or service steps in order, records the running one in `clean_step` / `deploy_step` /
 * `service_step` and the plan with its position in
 * driver_internal_info, so a call-back, an unhold or a restart in a wait state resumes where it stopped.
 */

/** Keys of the runner's bookkeeping in driver_internal_info (Ironic's names where it has them). */
export function bookkeeping(kind: StepKind) {
  return {
    steps: `${kind}_steps`,
    index: `${kind}_step_index`,
    requested: `${kind}_steps_requested`,
    disableRamdisk: `${kind}_disable_ramdisk`,
    discovered: `${kind}_steps_discovered`,
    agentSteps: `agent_cached_${kind}_steps`,
  } as const;
}

type StepField = "clean_step" | "deploy_step" | "service_step";

/** The node field that shows the running step of a plan. */
export function stepField(kind: StepKind): StepField {
  return `${kind}_step`;
}

/** A step failed: the message names the node and the step, as Ironic's last_error does. */
export class StepFailed extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StepFailed";
  }
}

/** What planning reads: the node and its interfaces (a Task, or the API's view of a node). */
export type PlanView = Pick<Task, "node" | "interfaces">;

function info(task: PlanView): Record<string, unknown> {
  return task.node.driver_internal_info;
}

function planOf(task: PlanView, kind: StepKind): PlannedStep[] {
  const parsed = PlannedStepSchema.array().safeParse(info(task)[bookkeeping(kind).steps]);
  return parsed.success ? parsed.data : [];
}

/** The operator's steps as validated at the API, back in the shape they were asked in (to check again). */
function requestedOf(task: PlanView, kind: StepKind): RequestedStep[] | null {
  const raw = info(task)[bookkeeping(kind).requested];
  if (raw === undefined || raw === null) return null;
  const parsed = PlannedStepSchema.array().safeParse(raw);
  if (!parsed.success)
    throw new StepFailed(`Node ${task.node.uuid}: the requested ${kind} steps are unreadable`);
  return parsed.data.map((s) => ({
    interface: s.interface,
    step: s.step,
    args: s.args,
    priority: s.priority,
  }));
}

/** The steps this node can run now: declared by its interfaces, merged with the agent's list once known. */
function availableSteps(task: PlanView, kind: StepKind): Step[] {
  const declared = declaredSteps(task.interfaces, kind);
  const reported = info(task)[bookkeeping(kind).agentSteps];
  return Array.isArray(reported) ? mergeAgentSteps(declared, parseReportedSteps(reported, kind)) : declared;
}

/** The plan: manual steps as asked, else the automated ones (with deploy_steps merged in for a deploy). */
function makePlan(task: PlanView, kind: StepKind): PlannedStep[] {
  const steps = availableSteps(task, kind);
  const requested = requestedOf(task, kind);
  const disableRamdisk = info(task)[bookkeeping(kind).disableRamdisk] === true;
  if ((kind === "clean" || kind === "service") && requested !== null) {
    // re-checked against the agent's list: a step the agent does not offer fails here, before anything runs
    return validateRequested(requested, steps, { kind, disableRamdisk });
  }
  if (kind === "deploy") {
    const user = requested ? validateRequested(requested, steps, { kind }) : [];
    // the templates' steps, checked again against what the agent offers (as Ironic re-validates them)
    const templates = validateRequested(templateStepsOf(info(task)), steps, { kind });
    return deployPlan(steps, withTemplateSteps(user, templates));
  }
  return automatedPlan(steps);
}

/** Whether a plan needs the deploy ramdisk's agent. */
export function needsAgent(task: PlanView, kind: StepKind): boolean {
  return (
    info(task)[bookkeeping(kind).disableRamdisk] !== true &&
    planOf(task, kind).some((s) => s.requires_ramdisk)
  );
}

/** Records a plan (from its first step) with any other bookkeeping given. */
async function savePlan(
  task: Task,
  kind: StepKind,
  entries: { plan: PlannedStep[]; extra?: Record<string, unknown> },
): Promise<void> {
  const keys = bookkeeping(kind);
  await task.update({
    driver_internal_info: {
      ...info(task),
      ...entries.extra,
      [keys.steps]: entries.plan,
      [keys.index]: 0,
      [IN_FLIGHT_KEY]: undefined,
    },
  });
}

/** Asks the agent which steps it offers (get_clean_steps / get_deploy_steps) and plans again with them. */
async function discover(task: Task, kind: StepKind): Promise<void> {
  const keys = bookkeeping(kind);
  // NOTE: an agent protocol without get_<kind>_steps: the declared list is trusted as it is
  const command = COMMAND_NAMES.find((name) => name === `get_${kind}_steps`);
  let reported: unknown[] | null = null;
  if (command) {
    const raw = await task.deps.agents.call(
      task.node.uuid,
      { name: command, args: {} },
      { signal: task.signal, timeoutMs: 60_000 },
    );
    reported = parseReportedSteps(raw, kind);
  }
  await task.update({
    driver_internal_info: {
      ...info(task),
      [keys.discovered]: true,
      ...(reported ? { [keys.agentSteps]: reported } : {}),
    },
  });
  try {
    await savePlan(task, kind, { plan: makePlan(task, kind) });
  } catch (error) {
    throw new StepFailed(`Node ${task.node.uuid}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/**
 * Plans the steps (the operator's, validated at the API, are in driver_internal_info) and runs them; boots the
 * ramdisk first when a step needs the agent (WAIT until it calls back) unless fast track keeps one running.
 */
export async function beginSteps(task: Task, kind: StepKind): Promise<FlowOutcome> {
  const keys = bookkeeping(kind);
  let plan: PlannedStep[];
  try {
    plan = makePlan(task, kind);
  } catch (error) {
    throw new StepFailed(`Node ${task.node.uuid}: ${error instanceof Error ? error.message : String(error)}`);
  }
  await savePlan(task, kind, { plan, extra: { [keys.discovered]: false, [keys.agentSteps]: undefined } });
  if (!needsAgent(task, kind)) return continueSteps(task, kind);
  if (canFastTrack(task)) return resumeSteps(task, kind);
  await bootIntoRamdisk(task);
  return WAIT;
}

/** After the agent's call-back or an unhold: learns the agent's steps once, then continues the plan. */
export async function resumeSteps(task: Task, kind: StepKind): Promise<FlowOutcome> {
  if (needsAgent(task, kind) && info(task)[bookkeeping(kind).discovered] !== true) await discover(task, kind);
  return continueSteps(task, kind);
}

/** Runs one step within its time limit; a timeout cancels it through the task's signal. */
async function runOne(task: Task, step: Step, planned: PlannedStep): Promise<void> {
  const limitMs = step.timeoutMs ?? task.deps.config.agent.commandTimeoutS * 1000;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new StepFailed(`step timed out after ${limitMs / 1000} s`);
      task.abort(error.message);
      reject(error);
    }, limitMs);
  });
  const running = step.run(task, planned.args);
  running.catch(() => undefined);
  try {
    await Promise.race([running, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The message an operator's abort left on the task's signal, if any. */
function abortMessage(task: Task): string | null {
  if (!task.signal.aborted) return null;
  const reason: unknown = task.signal.reason;
  return reason instanceof Error ? reason.message : String(reason);
}

/** Runs the plan from its recorded position until it ends, holds, or a step fails. */
export async function continueSteps(task: Task, kind: StepKind): Promise<FlowOutcome> {
  const keys = bookkeeping(kind);
  const field = stepField(kind);
  const plan = planOf(task, kind);
  const steps = availableSteps(task, kind);
  const start = Number(info(task)[keys.index] ?? 0);
  for (let index = start; index < plan.length; index++) {
    const planned = plan[index]!;
    const marker = stepMarker(kind, index);
    // the agent commands this step sent before a takeover are kept (asked again by id); any other is stale
    const inFlight = inFlightFor(task.node, marker) ?? undefined;
    await task.update({
      [field]: planned,
      driver_internal_info: { ...info(task), [keys.index]: index, [IN_FLIGHT_KEY]: inFlight },
    });
    if (planned.step === "hold") {
      // unhold continues with the next step
      await task.update({ driver_internal_info: { ...info(task), [keys.index]: index + 1 } });
      return HOLD;
    }
    const step = findStep(steps, planned);
    const id = stepId(planned);
    task.deps.publish({ type: "step", node: task.node.uuid, kind, step: id, status: "start" });
    try {
      if (!step) throw new Error("the node's interfaces and its agent no longer offer this step");
      task.runningStep = marker;
      try {
        await runOne(task, step, planned);
      } finally {
        task.runningStep = undefined;
      }
    } catch (error) {
      const aborted = abortMessage(task);
      const message = error instanceof Error ? error.message : String(error);
      task.deps.publish({ type: "step", node: task.node.uuid, kind, step: id, status: "failed" });
      if (aborted !== null && !(error instanceof StepFailed)) throw new StepFailed(aborted);
      throw new StepFailed(`Node ${task.node.uuid} failed ${kind} step ${id}: ${message}`);
    }
    task.deps.publish({ type: "step", node: task.node.uuid, kind, step: id, status: "done" });
    const current = task.node[field] as Partial<PlannedStep>;
    if (current.abort_after === true) {
      throw new StepFailed(
        `By request, the ${kind} operation was aborted after the completion of step "${id}"`,
      );
    }
  }
  await task.update({ [field]: {}, driver_internal_info: withoutBookkeeping(info(task), kind) });
  return DONE;
}

/** driver_internal_info without the runner's keys (a finished or failed plan). Pure. */
export function withoutBookkeeping(value: Record<string, unknown>, kind: StepKind): Record<string, unknown> {
  const keys = new Set<string>([...Object.values(bookkeeping(kind)), IN_FLIGHT_KEY]);
  return Object.fromEntries(Object.entries(value).filter(([key]) => !keys.has(key)));
}

/**
 * Does the node's running `kind` plan wait for the agent's answer to a command its current step sent? Then a
 * conductor taking it over (or restarting) can wait for the agent instead of failing the node.
 */
export function awaitsAgentAnswer(node: NodeRecord, kind: StepKind): boolean {
  const index = node.driver_internal_info[bookkeeping(kind).index];
  if (typeof index !== "number") return false;
  const record = inFlightFor(node, stepMarker(kind, index));
  return record !== null && Object.keys(record.ids).some((name) => !record.settled.includes(name));
}

/** The plan a node would run now (the running one, else what a new operation would plan): GET …/steps. */
export function previewSteps(task: PlanView, kind: StepKind): { steps: PlannedStep[]; index: number | null } {
  const running = planOf(task, kind);
  if (running.length > 0) {
    const index = info(task)[bookkeeping(kind).index];
    return { steps: running, index: typeof index === "number" ? index : null };
  }
  return { steps: makePlan(task, kind), index: null };
}
