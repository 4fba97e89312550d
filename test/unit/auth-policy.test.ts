import { describe, expect, it } from "vitest";
import type { Identity, Role } from "../../conductor/auth/identity.ts";
import { patchRules, redactNodeView } from "../../conductor/auth/node-access.ts";
import { allowed, type PolicyName } from "../../conductor/auth/policy.ts";

const who = (role: Role | null, project: string | null = null): Identity => ({
  user: "u",
  role,
  project,
  method: "http_basic",
});
const node = { owner: "A", lessee: "B" };

/** [rule, system admin, system reader, owner admin, owner member, owner reader, lessee admin, lessee member, other member] */
const MATRIX: [PolicyName, ...boolean[]][] = [
  ["baremetal:node:get", true, true, true, true, true, true, true, false],
  ["baremetal:node:get:driver_info", true, true, true, true, true, false, false, false],
  ["baremetal:node:update:driver_info", true, false, true, true, false, false, false, false],
  ["baremetal:node:update_instance_info", true, false, true, true, false, true, false, false],
  ["baremetal:node:set_provision_state", true, false, true, true, false, true, false, false],
  ["baremetal:node:set_power_state", true, false, true, true, false, true, true, false],
  ["baremetal:node:delete", true, false, false, false, false, false, false, false],
  ["baremetal:node:delete:self_owned_node", false, false, true, false, false, false, false, false],
  ["baremetal:node:update:owner", true, false, false, false, false, false, false, false],
  ["baremetal:node:traits:set", true, false, true, false, false, false, false, false],
  ["baremetal:node:history:get", true, true, true, true, true, false, false, false],
  ["baremetal:port:create", true, false, true, false, false, false, false, false],
];

describe("Ironic's default policy", () => {
  const people = [
    who("admin"),
    who("reader"),
    who("admin", "A"),
    who("member", "A"),
    who("reader", "A"),
    who("admin", "B"),
    who("member", "B"),
    who("member", "C"),
  ];
  for (const [rule, ...expected] of MATRIX) {
    it(rule, () => {
      expect(people.map((p) => allowed(rule, p, node))).toEqual(expected);
    });
  }

  it("a user with no role passes nothing; a missing target matches no project", () => {
    expect(allowed("baremetal:node:get", who(null), node)).toBe(false);
    expect(allowed("baremetal:node:get", who("admin", "A"), {})).toBe(false);
    expect(allowed("baremetal:node:get", who("admin", "A"), { owner: null })).toBe(false);
  });
});

describe("PATCH rules", () => {
  it("picks one rule per kind of field, generic update for the rest", () => {
    expect(patchRules([{ path: "/driver_info/ipmi_address" }])).toEqual([
      "baremetal:node:update:driver_info",
    ]);
    expect(patchRules([{ path: "/instance_info/image_source" }, { path: "/description" }])).toEqual([
      "baremetal:node:update_instance_info",
      "baremetal:node:update",
    ]);
    expect(patchRules([{ path: "/automated_clean", value: "False" }])).toEqual([
      "baremetal:node:disable_cleaning",
    ]);
    expect(patchRules([{ path: "/deploy_interface" }, { path: "/driver" }])).toEqual([
      "baremetal:node:update:driver_interfaces",
    ]);
  });
});

describe("node_sanitize", () => {
  it("a lessee sees notes instead of driver_info, driver_internal_info, last_error, reservation", () => {
    const view = redactNodeView(
      {
        driver_info: { ipmi_address: "10.0.0.1" },
        driver_internal_info: {},
        last_error: "bmc x",
        reservation: "c1",
      },
      who("admin", "B"),
      node,
    );
    expect(view.driver_info).toEqual({
      content: "** Redacted - requires baremetal:node:get:driver_info permission. **",
    });
    expect(view.last_error).toContain("Redacted");
    expect(view.reservation).toContain("Redacted");
    expect(JSON.stringify(view)).not.toContain("10.0.0.1");
  });

  it("the owner and system readers see them", () => {
    const view = { driver_info: { ipmi_address: "10.0.0.1" } };
    expect(redactNodeView({ ...view }, who("reader", "A"), node)).toEqual(view);
    expect(redactNodeView({ ...view }, who("reader"), node)).toEqual(view);
  });
});
