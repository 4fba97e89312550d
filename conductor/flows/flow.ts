import type { ProvisionEvent } from "../states/machine.ts";
import type { Task } from "../tasks/task.ts";

/** What the work of a transient state ended with. */
export type FlowOutcome =
  | { kind: "done" }
  /** an agent must call back: the node moves to its wait state and the lock is released */
  | { kind: "wait" }
  /** the state continues with another event (deleting → clean) */
  | { kind: "chain"; event: ProvisionEvent }
  /** a `hold` step: the node waits for the operator's unhold (or abort), the lock is released */
  | { kind: "hold" };

export const DONE: FlowOutcome = { kind: "done" };
export const WAIT: FlowOutcome = { kind: "wait" };
export const HOLD: FlowOutcome = { kind: "hold" };

/** The work behind one transient provision state. */
export interface Flow {
  /** Runs right after the transition into the transient state, under the node's lock. */
  start(task: Task): Promise<FlowOutcome>;
  /** Runs when the agent called back (after `resume`), under the lock. Absent: the flow never waits. */
  resume?(task: Task): Promise<FlowOutcome>;
  /** Best-effort clean-up after a failure, before the node enters its failed state. */
  onFail?(task: Task): Promise<void>;
}
