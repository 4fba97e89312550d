import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DeployTemplateCreateBody } from "../../shared/deploy-template.ts";
import type { PlannedStep } from "../../shared/steps.ts";
import {
  TEMPLATE_STEPS_KEY,
  templateStepsOf,
  withTemplateSteps,
} from "../../conductor/tasks/deploy-templates.ts";

const planned = (
  step: string,
  priority: number,
  iface: PlannedStep["interface"] = "deploy",
): PlannedStep => ({
  interface: iface,
  step,
  args: {},
  priority,
  abortable: false,
  requires_ramdisk: false,
});

describe("deploy template steps in a deploy plan", () => {
  it("lets the operator's deploy_steps win over a template's step of the same name", () => {
    const user = [planned("write_image", 0)];
    const templates = [planned("write_image", 90), planned("apply_configuration", 50, "raid")];
    const merged = withTemplateSteps(user, templates);
    expect(merged).toEqual([planned("write_image", 0), planned("apply_configuration", 50, "raid")]);
  });

  it("keeps every step of either list once, by interface and name (generated)", () => {
    const step = fc.record({
      step: fc.constantFrom("a", "b", "c", "d"),
      priority: fc.integer({ min: 0, max: 100 }),
      iface: fc.constantFrom("deploy" as const, "raid" as const),
    });
    const list = fc
      .array(step, { maxLength: 6 })
      .map((xs) => xs.map((x) => planned(x.step, x.priority, x.iface)))
      .map((xs) =>
        xs.filter((x, i) => xs.findIndex((y) => y.interface === x.interface && y.step === x.step) === i),
      );
    fc.assert(
      fc.property(list, list, (user, templates) => {
        const merged = withTemplateSteps(user, templates);
        const ids = merged.map((s) => `${s.interface}.${s.step}`);
        expect(new Set(ids).size).toBe(ids.length);
        for (const s of [...user, ...templates]) expect(ids).toContain(`${s.interface}.${s.step}`);
        expect(merged.slice(0, user.length)).toEqual(user);
      }),
    );
  });

  it("reads recorded steps back and ignores anything unreadable", () => {
    expect(templateStepsOf({ [TEMPLATE_STEPS_KEY]: [planned("deploy", 10)] })).toEqual([
      { interface: "deploy", step: "deploy", args: {}, priority: 10 },
    ]);
    expect(templateStepsOf({})).toEqual([]);
    expect(templateStepsOf({ [TEMPLATE_STEPS_KEY]: "junk" })).toEqual([]);
  });
});

describe("deploy template bodies", () => {
  it("never throws on any input, only accepts or refuses (generated)", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const parsed = DeployTemplateCreateBody.safeParse(value);
        if (parsed.success) expect(parsed.data.steps.length).toBeGreaterThan(0);
      }),
    );
  });

  it("accepts a priority as digits, as Ironic does, and refuses other strings", () => {
    const body = (priority: unknown) => ({
      name: "CUSTOM_X",
      steps: [{ interface: "deploy", step: "deploy", args: {}, priority }],
    });
    expect(DeployTemplateCreateBody.parse(body("10")).steps[0]?.priority).toBe(10);
    expect(DeployTemplateCreateBody.safeParse(body("-1")).success).toBe(false);
    expect(DeployTemplateCreateBody.safeParse(body("1e3")).success).toBe(false);
    expect(DeployTemplateCreateBody.safeParse(body(1001)).success).toBe(false);
  });
});
