import type { NodeRecord } from "../../shared/resources.ts";
import type { ProvisionState, ProvisionVerb } from "../../shared/states.ts";
import { Invalid } from "../errors.ts";
import { STABLE_STATES, nextState, targetState, type ProvisionEvent } from "../states/machine.ts";

export class InvalidTransition extends Invalid {
  constructor(verb: ProvisionVerb | ProvisionEvent, node: NodeRecord) {
    super(
      `The requested action "${verb}" can not be performed on node "${node.uuid}" while it is in state "${node.provision_state}".`,
    );
  }
}

/** The fields a transition writes. Pure. @throws InvalidTransition */
export function transitionPatch(
  node: NodeRecord,
  event: ProvisionEvent,
  label: ProvisionVerb | ProvisionEvent = event,
): Pick<NodeRecord, "provision_state" | "target_provision_state" | "provision_updated_at"> {
  const next = nextState(node.provision_state, event);
  if (next === null) throw new InvalidTransition(label, node);
  const started = targetState(node.provision_state, event);
  let target: ProvisionState | null;
  if (STABLE_STATES.includes(next)) target = null;
  else if (started !== null) target = started;
  else target = node.target_provision_state;
  return {
    provision_state: next,
    target_provision_state: target,
    provision_updated_at: new Date().toISOString(),
  };
}
