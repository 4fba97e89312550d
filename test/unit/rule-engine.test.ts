import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { defaultConfig } from "../../conductor/config.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import {
  applyInspectionRules,
  InspectionRuleFailure,
  RuleExecutionError,
  type RuleSubject,
} from "../../conductor/flows/rule-engine.ts";
import { newNode } from "../../conductor/operations/node-record.ts";
import type { InspectionRule } from "../../shared/inspection-rule.ts";
import { FormatError, pyFormat } from "../../shared/py-format.ts";
import { newPortRecord } from "../../shared/resources.ts";
import { sampleInventory } from "../helpers/agent.ts";

const fake = defaultDrivers(defaultConfig()).get("fake-hardware")!;

function subject(
  inventory: Record<string, unknown> = sampleInventory() as unknown as Record<string, unknown>,
) {
  const node = {
    ...newNode({ driver: "fake-hardware" }, fake),
    properties: { capabilities: "boot_mode:uefi" },
  };
  const logs: string[] = [];
  const s: RuleSubject & { logs: string[] } = {
    node,
    ports: [newPortRecord({ address: "52:54:00:90:35:d6", node_uuid: node.uuid })],
    inventory,
    pluginData: { bmc_password: "hunter2", nested: { a: 1 } },
    log: (_level, message) => logs.push(message),
    logs,
  };
  return s;
}

let n = 0;
const rule = (fields: Partial<InspectionRule>): InspectionRule => ({
  uuid: `00000000-0000-0000-0000-${(n++).toString().padStart(12, "0")}`,
  description: null,
  priority: 0,
  sensitive: false,
  phase: "main",
  conditions: [],
  actions: [],
  ...fields,
});

describe("pyFormat", () => {
  it("reads dict items, object attributes and escapes as Python's str.format", () => {
    const ctx = { inventory: { cpu: { count: 8, flags: ["a", "b"] } }, node: { properties: { x: true } } };
    const objects = new Set(["node"]);
    expect(pyFormat("{inventory[cpu][count]} cpus", ctx, objects)).toBe("8 cpus");
    expect(pyFormat("{inventory[cpu][flags][1]}", ctx, objects)).toBe("b");
    expect(pyFormat("{inventory[cpu][flags]}", ctx, objects)).toBe("['a', 'b']");
    expect(pyFormat("{node.properties[x]} {{literal}}", ctx, objects)).toBe("True {literal}");
    expect(() => pyFormat("{inventory[gpu]}", ctx, objects)).toThrow(FormatError);
    expect(() => pyFormat("{inventory.cpu}", ctx, objects)).toThrow(/attribute/);
    expect(() => pyFormat("{inventory[cpu]:>5}", ctx, objects)).toThrow(FormatError);
  });
});

describe("applyInspectionRules", () => {
  it("sets resource class, traits, capabilities and properties when the conditions hold", () => {
    const s = subject();
    const applied = applyInspectionRules(
      [
        rule({
          conditions: [
            { op: "eq", args: { values: ["{inventory[cpu][architecture]}", "x86_64"] } },
            { op: "!is-empty", args: { value: "{inventory[interfaces]}" } },
            { op: "matches", args: { value: "{inventory[cpu][count]}", regex: "[0-9]+" } },
          ],
          actions: [
            { op: "set-attribute", args: { path: "resource_class", value: "gold" } },
            {
              op: "set-attribute",
              args: { path: "/properties/cpu_count", value: "{inventory[cpu][count]}" },
            },
            { op: "add-trait", args: { name: "CUSTOM_GOLD" } },
            { op: "set-capability", args: { name: "gpu", value: "none" } },
            { op: "unset-capability", args: { name: "boot_mode" } },
            { op: "extend-attribute", args: { path: "extra.tags", value: "x", unique: true } },
            { op: "extend-attribute", args: { path: "extra.tags", value: "x", unique: true } },
          ],
        }),
        rule({
          conditions: [{ op: "is-true", args: { value: false } }],
          actions: [{ op: "fail", args: ["no"] }],
        }),
      ],
      s,
    );
    expect(applied).toHaveLength(1);
    expect(s.node).toMatchObject({
      resource_class: "gold",
      traits: ["CUSTOM_GOLD"],
      properties: { cpu_count: "8", capabilities: "gpu:none" },
      extra: { tags: ["x"] },
    });
  });

  it("runs rules by priority, highest first, and a fail action stops inspection with its message", () => {
    const s = subject();
    const order: InspectionRule[] = [
      rule({ priority: 1, actions: [{ op: "fail", args: { msg: "too small: {inventory[cpu][count]}" } }] }),
      rule({ priority: 90, actions: [{ op: "add-trait", args: { name: "CUSTOM_FIRST" } }] }),
    ];
    expect(() => applyInspectionRules(order, s)).toThrow(
      new InspectionRuleFailure("too small: {inventory[cpu][count]}"),
    );
    expect(s.node.traits).toEqual(["CUSTOM_FIRST"]);
  });

  it("loops over items with any/all/first/last and formats every argument inside a loop", () => {
    const check = (multiple: "any" | "all" | "first" | "last", loop: unknown[]) => {
      const s = subject();
      applyInspectionRules(
        [
          rule({
            conditions: [{ op: "eq", args: { values: ["{item}", 8] }, loop, multiple }],
            actions: [{ op: "add-trait", args: { name: "CUSTOM_HIT" } }],
          }),
        ],
        s,
      );
      return s.node.traits.includes("CUSTOM_HIT");
    };
    expect(check("any", [1, 8])).toBe(true);
    expect(check("all", [1, 8])).toBe(false);
    expect(check("all", [8, "8"])).toBe(true);
    expect(check("last", [8, 1])).toBe(false);
    expect(check("first", [1, 8])).toBe(true);
    const s = subject();
    applyInspectionRules(
      [
        rule({
          actions: [
            {
              op: "set-attribute",
              args: { path: "{item[path]}", value: "{item[value]}" },
              loop: [
                { path: "driver_info/ipmi_address", value: "{inventory[bmc_address]}" },
                { path: "extra/arch", value: "{inventory[cpu][architecture]}" },
              ],
            },
          ],
        }),
      ],
      s,
    );
    expect(s.node.extra.arch).toBe("x86_64");
    expect(s.node.driver_info.ipmi_address).toBe(String(sampleInventory().bmc_address ?? "None"));
  });

  it("masks secrets unless told not to, and edits plugin data and ports", () => {
    const s = subject();
    const port = s.ports[0]!.uuid;
    applyInspectionRules(
      [
        rule({
          actions: [
            { op: "set-plugin-data", args: { path: "seen", value: "{plugin_data[bmc_password]}" } },
            { op: "extend-plugin-data", args: { path: "nested.list", value: 1 } },
            { op: "unset-plugin-data", args: { path: "nested.a" } },
            { op: "set-port-attribute", args: { port_id: port, path: "extra/switch", value: "sw1" } },
            { op: "set-port-attribute", args: { port_id: port, path: "pxe_enabled", value: false } },
          ],
        }),
      ],
      s,
    );
    expect(s.pluginData).toMatchObject({ seen: "***", nested: { list: [1] } });
    expect(s.pluginData.nested).not.toHaveProperty("a");
    expect(s.ports[0]).toMatchObject({ extra: { switch: "sw1" }, pxe_enabled: false });
    const open = subject();
    applyInspectionRules(
      [
        rule({
          actions: [{ op: "set-plugin-data", args: { path: "seen", value: "{plugin_data[bmc_password]}" } }],
        }),
      ],
      open,
      "never",
    );
    expect(open.pluginData.seen).toBe("hunter2");
  });

  it("checks networks, regular expressions, one-of and truthiness as Ironic's operators", () => {
    const holds = (condition: InspectionRule["conditions"][number]) => {
      const s = subject();
      applyInspectionRules(
        [rule({ conditions: [condition], actions: [{ op: "add-trait", args: { name: "CUSTOM_Y" } }] })],
        s,
      );
      return s.node.traits.length === 1;
    };
    expect(holds({ op: "in-net", args: { address: "10.1.2.3", subnet: "10.1.0.0/16" } })).toBe(true);
    expect(holds({ op: "in-net", args: { address: "10.2.2.3", subnet: "10.1.0.0/16" } })).toBe(false);
    expect(holds({ op: "in-net", args: { address: "fd00::5", subnet: "fd00::/64" } })).toBe(true);
    expect(holds({ op: "contains", args: { value: "QEMU Virtual CPU", regex: "Virtual" } })).toBe(true);
    expect(holds({ op: "matches", args: { value: "QEMU Virtual CPU", regex: "Virtual" } })).toBe(false);
    expect(holds({ op: "one-of", args: { value: "x86_64", values: ["aarch64", "x86_64"] } })).toBe(true);
    expect(holds({ op: "is-false", args: { value: "No" } })).toBe(true);
    expect(holds({ op: "is-empty", args: { value: "{inventory[missing]}" } })).toBe(true);
    expect(holds({ op: "gt", args: { values: [3, 2, 1] } })).toBe(true);
    expect(holds({ op: "!lt", args: { values: [1, 2] } })).toBe(false);
    expect(holds({ op: "eq", args: { values: [1, 2] }, invert: true })).toBe(true);
    expect(() => holds({ op: "gt", args: { values: ["4", 2] } })).toThrow(RuleExecutionError);
    expect(() => holds({ op: "in-net", args: { address: "x", subnet: "bad" } })).toThrow(RuleExecutionError);
  });

  it("refuses to change a node's identity or state", () => {
    for (const path of ["uuid", "provision_state", "driver_internal_info.x", "reservation"]) {
      const s = subject();
      expect(() =>
        applyInspectionRules([rule({ actions: [{ op: "set-attribute", args: { path, value: "x" } }] })], s),
      ).toThrow(RuleExecutionError);
    }
  });

  it("never throws anything but its own two errors, whatever the inventory and rule (generated)", () => {
    const op = fc.constantFrom(
      ...["eq", "lt", "gt", "is-empty", "in-net", "matches", "contains", "one-of", "is-none", "is-true"],
      ...["is-false", "!eq", "bogus"],
    );
    const action = fc.constantFrom(
      ...["set-attribute", "extend-attribute", "del-attribute", "set-capability", "unset-capability"],
      ...["add-trait", "remove-trait", "set-plugin-data", "extend-plugin-data", "unset-plugin-data"],
      ...["set-port-attribute", "del-port-attribute", "log", "nope"],
    );
    const text = fc.oneof(
      fc.constantFrom(
        "{inventory[cpu][count]}",
        "{inventory}",
        "{node.properties}",
        "{item}",
        "{",
        "}",
        "{0}",
      ),
      fc.string({ maxLength: 12 }),
    );
    const value = fc.oneof(text, fc.jsonValue({ maxDepth: 2 }));
    const args = fc.oneof(
      fc.record(
        {
          values: fc.oneof(fc.array(value, { maxLength: 3 }), value),
          value,
          regex: fc.oneof(text, fc.constantFrom("(", "[a-", ".*")),
          address: value,
          subnet: value,
          path: fc.oneof(text, fc.constantFrom("extra.a", "/properties/x", "__proto__.x", "traits")),
          name: value,
          msg: value,
          port_id: value,
          unique: fc.boolean(),
        },
        { requiredKeys: [] },
      ),
      fc.array(value, { maxLength: 3 }),
    );
    const loop = fc.option(fc.oneof(fc.array(value, { maxLength: 3 }), fc.dictionary(fc.string(), value)), {
      nil: undefined,
    });
    const arbRule = fc.record({
      conditions: fc.array(fc.record({ op, args, loop }), { maxLength: 2 }),
      actions: fc.array(fc.record({ op: action, args, loop }), { maxLength: 3 }),
      priority: fc.integer({ min: 0, max: 5 }),
    });
    const inventory = fc.oneof(
      fc.constant(sampleInventory() as unknown as Record<string, unknown>),
      fc.dictionary(fc.constantFrom("cpu", "interfaces", "bmc_address", "x"), fc.jsonValue({ maxDepth: 3 })),
    );
    fc.assert(
      fc.property(fc.array(arbRule, { maxLength: 3 }), inventory, (rules, inv) => {
        try {
          applyInspectionRules(
            rules.map((r) => rule(r as Partial<InspectionRule>)),
            subject(inv),
          );
        } catch (error) {
          expect(
            error instanceof RuleExecutionError || error instanceof InspectionRuleFailure,
            String(error),
          ).toBe(true);
        }
      }),
      { numRuns: 400 },
    );
  });
});
