import { describe, expect, it } from "vitest";
import { isFailedState, judge } from "../../conductor/cli/settle.ts";

describe("when a watched node has settled", () => {
  it("knows the failure states", () => {
    expect(isFailedState("deploy failed")).toBe(true);
    expect(isFailedState("error")).toBe(true);
    expect(isFailedState("deploying")).toBe(false);
  });

  it("a stable state with no target is done", () => {
    expect(judge({ provision_state: "available", target_provision_state: null }, {})).toEqual({
      kind: "done",
    });
  });

  it("a stable state with a target, or a wait state, is still moving", () => {
    expect(judge({ provision_state: "manageable", target_provision_state: "available" }, {}).kind).toBe(
      "pending",
    );
    expect(judge({ provision_state: "wait call-back", target_provision_state: "active" }, {}).kind).toBe(
      "pending",
    );
  });

  it("a failed state fails with last_error, unless the action was abort", () => {
    const node = {
      provision_state: "deploy failed",
      target_provision_state: null,
      last_error: "checksum mismatch",
    };
    expect(judge(node, {})).toEqual({
      kind: "failed",
      message: 'node is in "deploy failed": checksum mismatch',
    });
    expect(judge(node, { expectFailure: true })).toEqual({ kind: "done" });
  });

  it("hold states end the watch", () => {
    expect(judge({ provision_state: "clean hold" }, {}).kind).toBe("done");
  });

  it("with a goal state: reaching it is done, settling elsewhere fails", () => {
    expect(
      judge({ provision_state: "deploying", target_provision_state: "active" }, { state: "deploying" }).kind,
    ).toBe("done");
    expect(judge({ provision_state: "available" }, { state: "active" })).toEqual({
      kind: "failed",
      message: 'node settled in "available", not "active"',
    });
    expect(
      judge({ provision_state: "cleaning", target_provision_state: "available" }, { state: "active" }).kind,
    ).toBe("pending");
  });
});
