import type { ProvisionState } from "../../shared/states.ts";
import type { StepKind } from "../../shared/steps.ts";
import { collectRamdiskLogs } from "../drivers/ramdisk-logs.ts";
import { nextState } from "../states/machine.ts";
import type { Task } from "../tasks/task.ts";
import type { Flow } from "./flow.ts";
import { flowFor } from "./select.ts";
import { awaitsAgentAnswer } from "./step-runner.ts";

/** The transient state whose flow owns a wait or hold state's clean-up and resume. */
export const WORKING_STATE: Partial<Record<ProvisionState, ProvisionState>> = {
  "inspect wait": "inspecting",
  "clean wait": "cleaning",
  "clean hold": "cleaning",
  "wait call-back": "deploying",
  "deploy hold": "deploying",
  "rescue wait": "rescuing",
  "service wait": "servicing",
  "service hold": "servicing",
};

/** The step plan a transient state runs, where its steps may wait on the agent. */
const PLAN_OF_STATE: Partial<Record<ProvisionState, StepKind>> = {
  cleaning: "clean",
  deploying: "deploy",
  servicing: "service",
};

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The flow of a state for this task's node; null when none (or the node's interfaces are unknown). */
export function flowOf(task: Task, state: ProvisionState = task.node.provision_state): Flow | null {
  try {
    return flowFor(state, task.interfaces);
  } catch {
    return null;
  }
}

/**
 * Records a failure: the ramdisk's logs first while its agent is still there (Ironic collects them before the
 * error handler powers the node off), then the flow's clean-up (whoever sees the failed state also sees the node powered off),
 * then the state's `fail` event, or only last_error where the state has none. Never throws. Without `flow`,
 * the flow of the node's state, or of the transient state a wait or hold state belongs to: a deploy failed in
 * `wait call-back` is cleaned up (powered off) as one failed in `deploying`.
 */
export async function failWork(task: Task, message: string, flow?: Flow | null): Promise<void> {
  const state = task.node.provision_state;
  task.log.warn({ error: message, state }, "provisioning failed");
  const failingFlow = flow ?? flowOf(task, WORKING_STATE[state] ?? state);
  const failed = nextState(task.node.provision_state, "fail");
  await collectRamdiskLogs(task, failed ?? `${task.node.provision_state} failed`, "failure");
  try {
    await failingFlow?.onFail?.(task);
    if (failed) await task.fire("fail", { last_error: message });
    else await task.update({ last_error: message });
  } catch (error) {
    task.log.error({ err: error }, "could not record a failure");
  }
}

/** Background work: its failures land in the state's failure state. */
export function guarded(work: (task: Task) => Promise<void>): (task: Task) => Promise<void> {
  return async (task) => {
    try {
      await work(task);
    } catch (error) {
      await failWork(task, errorMessage(error));
    }
  };
}

/**
 * A clean or deploy step cut off while it waits for its agent's answer (the conductor stops, or died and
 * this one takes over): the node goes to its wait state, and the agent's call-back runs the step again, which
 * asks for the same command and gets its result. False when the node's step waits for no such answer.
 */
export async function handToAgent(task: Task, why: string): Promise<boolean> {
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
 * Drives the flow of the node's current transient state until it waits, holds, settles or fails. While the
 * conductor is `stopping`, a step cut off waiting on its agent is handed to the agent instead of failed.
 */
export async function driveFlow(
  task: Task,
  entry: "start" | "resume",
  stopping: () => boolean,
): Promise<void> {
  let phase = entry;
  for (;;) {
    const flow = flowOf(task);
    if (!flow) return;
    let outcome;
    try {
      outcome = phase === "resume" && flow.resume ? await flow.resume(task) : await flow.start(task);
    } catch (error) {
      const handed = stopping() && (await handToAgent(task, "conductor stopping").catch(() => false));
      if (handed) return;
      await failWork(task, errorMessage(error), flow);
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
