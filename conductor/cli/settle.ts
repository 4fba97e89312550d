/** When a watched node counts as settled, and whether that is success. Pure. */

const STABLE = new Set(["enroll", "manageable", "available", "active", "rescue"]);
/** Hold states wait for the operator (unhold), so a watch ends there too. */
const HOLD = new Set(["clean hold", "deploy hold", "service hold"]);

export function isFailedState(state: string): boolean {
  return state === "error" || state.endsWith(" failed");
}

export interface NodeProgressState {
  provision_state: string;
  target_provision_state?: string | null | undefined;
  last_error?: string | null | undefined;
}

export interface WatchGoal {
  /** Wait for exactly this provision state (`node wait --state`). */
  state?: string | undefined;
  /** The action drives the node into a failed state on purpose (abort). */
  expectFailure?: boolean | undefined;
}

export type Verdict = { kind: "pending" } | { kind: "done" } | { kind: "failed"; message: string };

export function judge(node: NodeProgressState, goal: WatchGoal): Verdict {
  const state = node.provision_state;
  const settled = (STABLE.has(state) || HOLD.has(state)) && !node.target_provision_state;
  const failedMessage = (): string => `node is in "${state}": ${node.last_error ?? "no error was recorded"}`;
  if (goal.state !== undefined) {
    if (state === goal.state) return { kind: "done" };
    if (isFailedState(state)) return { kind: "failed", message: failedMessage() };
    if (settled) return { kind: "failed", message: `node settled in "${state}", not "${goal.state}"` };
    return { kind: "pending" };
  }
  if (isFailedState(state))
    return goal.expectFailure ? { kind: "done" } : { kind: "failed", message: failedMessage() };
  return settled ? { kind: "done" } : { kind: "pending" };
}
