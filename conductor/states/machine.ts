import { PROVISION_VERBS, type ProvisionState, type ProvisionVerb } from "../../shared/states.ts";

/** Events only the conductor fires, as work progresses. */
const INTERNAL_EVENTS = ["done", "fail", "wait", "resume", "hold"] as const;

/** Events of Ironic's provision state machine: the API verbs (two renamed, see verbEvent) and internal ones. */
export type ProvisionEvent =
  Exclude<ProvisionVerb, "active" | "deleted"> | "deploy" | "delete" | (typeof INTERNAL_EVENTS)[number];

type Transition = readonly [from: ProvisionState, event: ProvisionEvent, to: ProvisionState];

/** Every transition of Ironic's state machine, one line each: (from, event) -> to. */
export const TRANSITIONS: readonly Transition[] = [
  ["enroll", "manage", "verifying"], // operator: check power credentials
  ["verifying", "done", "manageable"], // conductor: power credentials work
  ["verifying", "fail", "enroll"], // conductor: power credentials fail
  ["manageable", "provide", "cleaning"], // operator: make available (automated cleaning)
  ["manageable", "clean", "cleaning"], // operator: manual cleaning
  ["manageable", "inspect", "inspecting"], // operator: inspect
  ["manageable", "adopt", "adopting"], // operator: adopt a running node
  ["inspecting", "done", "manageable"], // conductor: inspection finished in band or out of band
  ["inspecting", "fail", "inspect failed"], // conductor: inspection failed
  ["inspecting", "wait", "inspect wait"], // conductor: waiting for the agent
  ["inspect wait", "done", "manageable"], // agent: inventory received
  ["inspect wait", "fail", "inspect failed"], // conductor: timeout
  ["inspect wait", "abort", "inspect failed"], // operator: abort
  ["inspect wait", "resume", "inspecting"], // agent: connected, processing
  ["inspect failed", "manage", "manageable"], // operator: give up
  ["inspect failed", "inspect", "inspecting"], // operator: retry
  ["cleaning", "done", "available"], // conductor: cleaning finished
  ["cleaning", "fail", "clean failed"], // conductor: a step failed
  ["cleaning", "wait", "clean wait"], // conductor: waiting for the agent
  ["cleaning", "hold", "clean hold"], // step: hold
  ["cleaning", "manage", "manageable"], // conductor: manual cleaning finished
  ["clean wait", "fail", "clean failed"], // conductor: timeout
  ["clean wait", "abort", "clean failed"], // operator: abort
  ["clean wait", "hold", "clean hold"], // step: hold
  ["clean wait", "resume", "cleaning"], // agent: connected
  ["clean hold", "abort", "clean failed"], // operator: abort
  ["clean hold", "unhold", "clean wait"], // operator: continue
  ["clean failed", "manage", "manageable"], // operator: recover
  ["available", "deploy", "deploying"], // operator or compute: deploy
  ["available", "manage", "manageable"], // operator: take back
  ["deploying", "fail", "deploy failed"], // conductor: a step failed
  ["deploying", "wait", "wait call-back"], // conductor: waiting for the agent
  ["deploying", "hold", "deploy hold"], // step: hold
  ["deploying", "done", "active"], // conductor: deployed
  ["wait call-back", "hold", "deploy hold"], // step: hold
  ["wait call-back", "resume", "deploying"], // agent: connected
  ["wait call-back", "fail", "deploy failed"], // conductor: timeout
  ["wait call-back", "abort", "deploy failed"], // operator: abort
  ["wait call-back", "delete", "deleting"], // operator: undeploy while waiting
  ["deploy hold", "unhold", "wait call-back"], // operator: continue
  ["deploy hold", "abort", "deploy failed"], // operator: abort
  ["deploy failed", "rebuild", "deploying"], // operator: retry with rebuild
  ["deploy failed", "deploy", "deploying"], // operator: retry
  ["deploy failed", "delete", "deleting"], // operator: give up
  ["active", "rebuild", "deploying"], // operator: rebuild
  ["active", "delete", "deleting"], // operator or compute: undeploy
  ["active", "rescue", "rescuing"], // operator: rescue
  ["active", "service", "servicing"], // operator: service steps
  ["deleting", "fail", "error"], // conductor: tear down failed
  ["deleting", "clean", "cleaning"], // conductor: tear down done, clean
  ["error", "rebuild", "deploying"], // operator: retry
  ["error", "delete", "deleting"], // operator: undeploy
  ["rescuing", "done", "rescue"], // conductor: rescued
  ["rescuing", "wait", "rescue wait"], // conductor: waiting for the agent
  ["rescuing", "fail", "rescue failed"], // conductor: failed
  ["rescue wait", "resume", "rescuing"], // agent: connected
  ["rescue wait", "fail", "rescue failed"], // conductor: timeout
  ["rescue wait", "abort", "rescue failed"], // operator: abort
  ["rescue wait", "delete", "deleting"], // operator: undeploy
  ["rescue", "rescue", "rescuing"], // operator: rescue again
  ["rescue", "delete", "deleting"], // operator: undeploy
  ["rescue", "unrescue", "unrescuing"], // operator: back to active
  ["rescue failed", "rescue", "rescuing"], // operator: retry
  ["rescue failed", "unrescue", "unrescuing"], // operator: back to active
  ["rescue failed", "delete", "deleting"], // operator: undeploy
  ["unrescuing", "done", "active"], // conductor: unrescued
  ["unrescuing", "fail", "unrescue failed"], // conductor: failed
  ["unrescue failed", "rescue", "rescuing"], // operator: rescue
  ["unrescue failed", "unrescue", "unrescuing"], // operator: retry
  ["unrescue failed", "delete", "deleting"], // operator: undeploy
  ["adopting", "done", "active"], // conductor: adopted
  ["adopting", "fail", "adopt failed"], // conductor: failed
  ["adopt failed", "adopt", "adopting"], // operator: retry
  ["adopt failed", "manage", "manageable"], // operator: give up
  ["servicing", "done", "active"], // conductor: serviced
  ["servicing", "fail", "service failed"], // conductor: a step failed
  ["servicing", "wait", "service wait"], // conductor: waiting for the agent
  ["servicing", "hold", "service hold"], // step: hold
  ["service wait", "hold", "service hold"], // step: hold
  ["service wait", "resume", "servicing"], // agent: connected
  ["service wait", "fail", "service failed"], // conductor: timeout
  ["service wait", "abort", "service failed"], // operator: abort
  ["service wait", "delete", "deleting"], // operator: undeploy
  ["service hold", "service", "servicing"], // operator: continue servicing
  ["service hold", "unhold", "service wait"], // operator: continue
  ["service hold", "fail", "service failed"], // conductor: failed
  ["service hold", "abort", "service failed"], // operator: abort
  ["service failed", "service", "servicing"], // operator: retry
  ["service failed", "rescue", "rescuing"], // operator: rescue
  ["service failed", "wait", "service wait"], // conductor: waiting
  ["service failed", "hold", "service hold"], // step: hold
  ["service failed", "delete", "deleting"], // operator: undeploy
  ["service failed", "abort", "active"], // operator: abort servicing
];

const TABLE = new Map<string, ProvisionState>(
  TRANSITIONS.map(([from, event, to]) => [`${from}|${event}`, to]),
);

/** The state an event leads to, or null when the event is not allowed in that state. Pure. */
export function nextState(from: ProvisionState, event: ProvisionEvent): ProvisionState | null {
  return TABLE.get(`${from}|${event}`) ?? null;
}

/** API verbs whose event name differs from the verb. */
export function verbEvent(verb: ProvisionVerb): ProvisionEvent {
  switch (verb) {
    case "active":
      return "deploy";
    case "deleted":
      return "delete";
    case "manage":
    case "provide":
    case "inspect":
    case "clean":
    case "rebuild":
    case "abort":
    case "rescue":
    case "unrescue":
    case "adopt":
    case "service":
    case "unhold":
      return verb;
  }
}

/** Every event, derived from the verbs so the two lists cannot drift apart. */
export const EVENTS: readonly ProvisionEvent[] = [...PROVISION_VERBS.map(verbEvent), ...INTERNAL_EVENTS];

/** Stable states: nothing is in flight; a node at rest in one of these needs no conductor attention. */
export const STABLE_STATES: readonly ProvisionState[] = [
  "enroll",
  "manageable",
  "available",
  "active",
  "error",
  "rescue",
];

/** Wait states: the conductor waits for an agent; each has a timeout. */
export const WAIT_STATES: readonly ProvisionState[] = [
  "inspect wait",
  "clean wait",
  "wait call-back",
  "rescue wait",
  "service wait",
];

/** Transient states: work runs in them under the node's lock; a restart abandons that work. */
export const TRANSIENT_STATES: readonly ProvisionState[] = [
  "verifying",
  "inspecting",
  "cleaning",
  "deploying",
  "deleting",
  "rescuing",
  "unrescuing",
  "adopting",
  "servicing",
];

/** Where a flow that started with `event` from `from` is heading (target_provision_state). */
export function targetState(from: ProvisionState, event: ProvisionEvent): ProvisionState | null {
  switch (event) {
    case "manage":
      return "manageable";
    case "provide":
      return "available";
    case "inspect":
      return "manageable";
    // manual cleaning returns to manageable; the cleaning after an undeploy heads for available
    case "clean":
      return from === "deleting" ? "available" : "manageable";
    case "deploy":
    case "rebuild":
    case "adopt":
    case "unrescue":
    case "service":
      return "active";
    case "delete":
      return "available";
    case "rescue":
      return "rescue";
    // unhold keeps the target the hold state carries (manageable for a manual clean, available otherwise)
    case "unhold":
    case "abort":
    case "done":
    case "fail":
    case "wait":
    case "resume":
    case "hold":
      return null;
  }
}
