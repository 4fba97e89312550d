import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { NoArgs, defineStep } from "../../conductor/drivers/step.ts";
import { TEMPLATE_STEPS_KEY } from "../../conductor/tasks/deploy-templates.ts";
import { stepHarness } from "../helpers/step-harness.ts";

const templateStep = (step: string) =>
  defineStep({
    kind: "deploy",
    interface: "deploy",
    step,
    priority: 0,
    args: NoArgs,
    async run() {},
  });

async function harnessWithTemplates() {
  const h = stepHarness({ steps: [templateStep("from_a"), templateStep("from_b")] });
  for (const [name, step] of [
    ["CUSTOM_A", "from_a"],
    ["CUSTOM_B", "from_b"],
  ] as const) {
    await h.store.createDeployTemplate({
      uuid: randomUUID(),
      name,
      steps: [{ interface: "deploy", step, args: {}, priority: 50 }],
      extra: {},
      created_at: new Date().toISOString(),
      updated_at: null,
    });
  }
  return h;
}

const recorded = (info: Record<string, unknown>) =>
  (info[TEMPLATE_STEPS_KEY] as { step: string }[] | undefined)?.map((s) => s.step);

/**
 * The deploy-template hook (instance traits → deploy steps) runs under the provision lock, on the node as
 * reserved: a change between the API's read of the node and the lock cannot leave a plan from stale traits.
 */
describe("deploy templates are matched under the provision lock", () => {
  it("uses the traits the node has when it is locked, not those of the node the caller read", async () => {
    const h = await harnessWithTemplates();
    const made = await h.createNode("available");
    const read = await h.store.updateNode(made.uuid, { instance_info: { traits: ["CUSTOM_A"] } });
    // another request (holding the lock, as node updates do) changes the traits after the caller's read
    await h.store.updateNode(made.uuid, { instance_info: { traits: ["CUSTOM_B"] } });
    await h.provisioner.provision(read, { target: "active" });
    await h.provisioner.settle();
    const node = await h.node(made.uuid);
    expect(node.provision_state).toBe("active");
    expect(recorded(node.driver_internal_info)).toEqual(["from_b"]);
  });

  it("records the template's steps with the transition: a later template edit changes no running plan", async () => {
    const h = await harnessWithTemplates();
    const made = await h.createNode("available");
    const node = await h.store.updateNode(made.uuid, { instance_info: { traits: ["CUSTOM_A"] } });
    await h.provisioner.provision(node, { target: "active" });
    const [a] = await h.store.listDeployTemplatesByNames(["CUSTOM_A"]);
    await h.store.updateDeployTemplate(a!.uuid, {
      steps: [{ interface: "deploy", step: "from_b", args: {}, priority: 50 }],
    });
    await h.provisioner.settle();
    expect(recorded((await h.node(made.uuid)).driver_internal_info)).toEqual(["from_a"]);
  });

  it("a template whose steps the node cannot run refuses the deploy and leaves the node unlocked", async () => {
    const h = await harnessWithTemplates();
    await h.store.createDeployTemplate({
      uuid: randomUUID(),
      name: "CUSTOM_BAD",
      steps: [{ interface: "deploy", step: "no_such_step", args: {}, priority: 50 }],
      extra: {},
      created_at: new Date().toISOString(),
      updated_at: null,
    });
    const made = await h.createNode("available");
    const node = await h.store.updateNode(made.uuid, { instance_info: { traits: ["CUSTOM_BAD"] } });
    await expect(h.provisioner.provision(node, { target: "active" })).rejects.toThrow(/CUSTOM_BAD/);
    const after = await h.node(made.uuid);
    expect(after.provision_state).toBe("available");
    expect(after.reservation).toBeNull();
  });
});
