import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  EVENTS,
  TRANSITIONS,
  nextState,
  targetState,
  verbEvent,
  type ProvisionEvent,
} from "../../conductor/states/machine.ts";
import { InvalidTransition, transitionPatch } from "../../conductor/tasks/transition.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import { PROVISION_STATES, PROVISION_VERBS, type ProvisionState } from "../../shared/states.ts";

/** Ironic's table, kept as a fixture (facts from Ironic 21.4, independent of our table). */
function referenceTransitions(): [string, string, string][] {
  const text = readFileSync(new URL("../fixtures/ironic-transitions.tsv", import.meta.url), "utf8");
  const rows: [string, string, string][] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const [from, event, to] = line.split("\t");
    if (from && event && to) rows.push([from, event, to]);
  }
  return rows;
}

const reference = referenceTransitions();

describe("the provision state machine", () => {
  it("has exactly Ironic's 93 transitions", () => {
    expect(reference).toHaveLength(93);
    expect(TRANSITIONS).toHaveLength(93);
    expect(new Set(TRANSITIONS.map(([from, event, to]) => `${from}|${event}|${to}`))).toEqual(
      new Set(reference.map(([from, event, to]) => `${from}|${event}|${to}`)),
    );
  });

  it.each(reference)("%s --%s--> %s", (from, event, to) => {
    expect(nextState(from as ProvisionState, event as ProvisionEvent)).toBe(to);
  });

  it("rejects every (state, event) pair Ironic does not define", () => {
    const defined = new Set(reference.map(([from, event]) => `${from}|${event}`));
    let rejected = 0;
    for (const state of PROVISION_STATES) {
      for (const event of EVENTS) {
        if (defined.has(`${state}|${event}`)) continue;
        expect(nextState(state, event), `${state} --${event}`).toBeNull();
        rejected++;
      }
    }
    expect(rejected).toBe(PROVISION_STATES.length * EVENTS.length - 93);
  });

  it("maps API verbs to events", () => {
    expect(verbEvent("active")).toBe("deploy");
    expect(verbEvent("deleted")).toBe("delete");
    for (const verb of PROVISION_VERBS.filter((v) => v !== "active" && v !== "deleted"))
      expect(verbEvent(verb)).toBe(verb);
  });

  it("sets target states the way Ironic reports them", () => {
    expect(targetState("available", "deploy")).toBe("active");
    expect(targetState("manageable", "provide")).toBe("available");
    expect(targetState("active", "delete")).toBe("available");
    expect(targetState("manageable", "inspect")).toBe("manageable");
  });

  const node = (state: ProvisionState, target: ProvisionState | null = null) =>
    ({ uuid: "u-1", provision_state: state, target_provision_state: target }) as NodeRecord;

  it("keeps the target through wait and failure, clears it in stable states", () => {
    expect(transitionPatch(node("available"), "deploy").target_provision_state).toBe("active");
    expect(transitionPatch(node("deploying", "active"), "wait").target_provision_state).toBe("active");
    expect(transitionPatch(node("wait call-back", "active"), "fail")).toMatchObject({
      provision_state: "deploy failed",
      target_provision_state: "active",
    });
    expect(transitionPatch(node("deploying", "active"), "done")).toMatchObject({
      provision_state: "active",
      target_provision_state: null,
    });
  });

  it("refuses an illegal verb with Ironic's message", () => {
    expect(() => transitionPatch(node("available"), "inspect", "inspect")).toThrow(InvalidTransition);
    expect(() => transitionPatch(node("available"), "inspect", "inspect")).toThrow(
      'The requested action "inspect" can not be performed on node "u-1" while it is in state "available".',
    );
  });
});
