import { hasRole, type Identity } from "./identity.ts";

/**
 * What a rule is checked against: the node's owner and lessee, or the allocation's owner. A field that is
 * absent or null matches no project (oslo.policy's `project_id:%(node.owner)s` with a missing key is false).
 */
export interface PolicyTarget {
  owner?: string | null;
  lessee?: string | null;
  allocationOwner?: string | null;
}

type Check = (who: Identity, target: PolicyTarget) => boolean;

// Ironic's personas (ironic/common/policy.py), with Keystone's implied roles admin ⊃ member ⊃ reader.
// A user without a project is system scoped; "manager" and "service" roles are not modelled.
const system =
  (role: "admin" | "member" | "reader"): Check =>
  (who) =>
    who.project === null && hasRole(who.role, role);
const is = (project: string | null, value: string | null | undefined): boolean =>
  project !== null && typeof value === "string" && project === value;
const owner =
  (role: "admin" | "member" | "reader"): Check =>
  (who, t) =>
    hasRole(who.role, role) && is(who.project, t.owner);
const lessee =
  (role: "admin" | "member" | "reader"): Check =>
  (who, t) =>
    hasRole(who.role, role) && is(who.project, t.lessee);
const allocationOwner =
  (role: "member" | "reader"): Check =>
  (who, t) =>
    hasRole(who.role, role) && is(who.project, t.allocationOwner);
const anyOf =
  (...checks: Check[]): Check =>
  (who, t) =>
    checks.some((c) => c(who, t));
const anyRole =
  (role: "admin" | "member" | "reader"): Check =>
  (who) =>
    hasRole(who.role, role);

const SYSTEM_ADMIN = system("admin");
const SYSTEM_MEMBER = system("member");
const SYSTEM_READER = system("reader");
const PROJECT_MEMBER = anyOf(owner("member"), lessee("member"));
const PROJECT_READER = anyOf(owner("reader"), lessee("reader"));
const SYSTEM_OR_PROJECT_MEMBER = anyOf(SYSTEM_MEMBER, PROJECT_MEMBER);
const SYSTEM_OR_PROJECT_READER = anyOf(SYSTEM_READER, PROJECT_READER);
const SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN = anyOf(SYSTEM_MEMBER, owner("member"), lessee("admin"));
const SYSTEM_ADMIN_OR_OWNER_ADMIN = anyOf(SYSTEM_ADMIN, owner("admin"));
const SYSTEM_MEMBER_OR_OWNER_ADMIN = anyOf(SYSTEM_MEMBER, owner("admin"));
const SYSTEM_MEMBER_OR_OWNER_MEMBER = anyOf(SYSTEM_MEMBER, owner("member"));
const SYSTEM_OR_OWNER_READER = anyOf(SYSTEM_READER, owner("reader"));
const ALLOCATION_MEMBER = anyOf(SYSTEM_MEMBER, allocationOwner("member"));
const ALLOCATION_READER = anyOf(SYSTEM_READER, allocationOwner("reader"));
const ALLOCATION_CREATOR = anyOf(SYSTEM_MEMBER, anyRole("member"));
const API_READER = anyRole("reader");
const SYSTEM_MEMBER_OR_OWNER_LESSEE_ADMIN = anyOf(SYSTEM_MEMBER, owner("admin"), lessee("admin"));
const TARGET_PROPERTIES_READER = anyOf(SYSTEM_READER, anyRole("admin"));
// Ironic's RUNBOOK_ADMIN / READER / CREATOR, the runbook's owner as `owner`; its "manager" role is not
// modelled, so a project's admin stands for it (Keystone's admin implies manager)
const RUNBOOK_ADMIN = anyOf(SYSTEM_MEMBER, owner("admin"));
const RUNBOOK_READER = anyOf(SYSTEM_READER, owner("reader"));
const RUNBOOK_CREATOR = anyOf(SYSTEM_MEMBER, anyRole("admin"));

/** Ironic's default rules by name (and two of Anvil's own, for its extensions). */
export const RULES = {
  "baremetal:node:create": SYSTEM_ADMIN,
  "baremetal:node:create:self_owned_node": anyRole("admin"),
  "baremetal:node:list": API_READER,
  "baremetal:node:list_all": SYSTEM_READER,
  "baremetal:node:get": SYSTEM_OR_PROJECT_READER,
  "baremetal:node:get:filter_threshold": SYSTEM_READER,
  "baremetal:node:get:last_error": SYSTEM_OR_OWNER_READER,
  "baremetal:node:get:reservation": SYSTEM_OR_OWNER_READER,
  "baremetal:node:get:driver_internal_info": SYSTEM_OR_OWNER_READER,
  "baremetal:node:get:driver_info": SYSTEM_OR_OWNER_READER,
  "baremetal:node:update:driver_info": SYSTEM_MEMBER_OR_OWNER_MEMBER,
  "baremetal:node:update:properties": SYSTEM_MEMBER_OR_OWNER_MEMBER,
  "baremetal:node:update:chassis_uuid": SYSTEM_ADMIN,
  "baremetal:node:update:instance_uuid": SYSTEM_MEMBER_OR_OWNER_MEMBER,
  "baremetal:node:update:lessee": SYSTEM_MEMBER_OR_OWNER_MEMBER,
  "baremetal:node:update:owner": SYSTEM_MEMBER,
  "baremetal:node:update:driver_interfaces": SYSTEM_MEMBER_OR_OWNER_ADMIN,
  "baremetal:node:update:network_data": SYSTEM_MEMBER_OR_OWNER_MEMBER,
  "baremetal:node:update:conductor_group": SYSTEM_MEMBER,
  "baremetal:node:update:name": SYSTEM_MEMBER_OR_OWNER_MEMBER,
  "baremetal:node:update:retired": SYSTEM_MEMBER_OR_OWNER_MEMBER,
  "baremetal:node:update:shard": SYSTEM_ADMIN,
  "baremetal:node:update:parent_node": SYSTEM_MEMBER,
  "baremetal:node:update:disable_power_off": SYSTEM_ADMIN,
  "baremetal:node:firmware:get": SYSTEM_OR_PROJECT_READER,
  "baremetal:node:update": SYSTEM_OR_PROJECT_MEMBER,
  "baremetal:node:update_extra": SYSTEM_OR_PROJECT_MEMBER,
  "baremetal:node:update_instance_info": SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
  "baremetal:node:disable_cleaning": SYSTEM_ADMIN,
  "baremetal:node:delete": SYSTEM_ADMIN,
  "baremetal:node:delete:self_owned_node": owner("admin"),
  "baremetal:node:validate": SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
  "baremetal:node:set_maintenance": SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
  "baremetal:node:clear_maintenance": SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
  "baremetal:node:get_boot_device": SYSTEM_MEMBER_OR_OWNER_ADMIN,
  "baremetal:node:set_boot_device": SYSTEM_MEMBER_OR_OWNER_ADMIN,
  "baremetal:node:get_states": SYSTEM_OR_PROJECT_READER,
  "baremetal:node:set_power_state": SYSTEM_OR_PROJECT_MEMBER,
  "baremetal:node:set_boot_mode": SYSTEM_OR_PROJECT_MEMBER,
  "baremetal:node:set_secure_boot": SYSTEM_OR_PROJECT_MEMBER,
  "baremetal:node:set_provision_state": SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
  "baremetal:node:set_raid_state": SYSTEM_MEMBER_OR_OWNER_MEMBER,
  "baremetal:node:traits:list": SYSTEM_OR_PROJECT_READER,
  "baremetal:node:traits:set": SYSTEM_MEMBER_OR_OWNER_ADMIN,
  "baremetal:node:traits:delete": SYSTEM_MEMBER_OR_OWNER_ADMIN,
  "baremetal:node:history:get": SYSTEM_OR_OWNER_READER,
  "baremetal:node:inventory:get": SYSTEM_OR_OWNER_READER,
  // Anvil's own (Ironic has no API for deploy logs): they may hold infrastructure details, so the node's
  // owner and the system read them as driver_info; collecting asks the node's agent for work, as a console does
  "baremetal:node:deploy_logs:get": SYSTEM_OR_OWNER_READER,
  "baremetal:node:deploy_logs:collect": SYSTEM_MEMBER_OR_OWNER_MEMBER,
  "baremetal:port:get": SYSTEM_OR_PROJECT_READER,
  "baremetal:port:list": API_READER,
  "baremetal:port:list_all": SYSTEM_READER,
  "baremetal:port:create": SYSTEM_ADMIN_OR_OWNER_ADMIN,
  "baremetal:port:delete": SYSTEM_ADMIN_OR_OWNER_ADMIN,
  "baremetal:port:update": SYSTEM_MEMBER_OR_OWNER_ADMIN,
  "baremetal:portgroup:get": SYSTEM_OR_PROJECT_READER,
  "baremetal:portgroup:list": API_READER,
  "baremetal:portgroup:list_all": SYSTEM_READER,
  "baremetal:portgroup:create": SYSTEM_ADMIN_OR_OWNER_ADMIN,
  "baremetal:portgroup:delete": SYSTEM_ADMIN_OR_OWNER_ADMIN,
  "baremetal:portgroup:update": SYSTEM_MEMBER_OR_OWNER_ADMIN,
  "baremetal:node:vif:list": SYSTEM_OR_PROJECT_READER,
  "baremetal:node:vif:attach": SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
  "baremetal:node:vif:detach": SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
  "baremetal:node:inject_nmi": SYSTEM_MEMBER_OR_OWNER_ADMIN,
  "baremetal:node:get_console": SYSTEM_MEMBER_OR_OWNER_MEMBER,
  "baremetal:node:set_console_state": SYSTEM_MEMBER_OR_OWNER_MEMBER,
  "baremetal:node:get_indicator_state": SYSTEM_OR_PROJECT_READER,
  "baremetal:node:vmedia:attach": SYSTEM_OR_PROJECT_MEMBER,
  "baremetal:node:vmedia:detach": SYSTEM_OR_PROJECT_MEMBER,
  "baremetal:node:vmedia:get": SYSTEM_OR_PROJECT_READER,
  "baremetal:node:set_indicator_state": SYSTEM_MEMBER_OR_OWNER_MEMBER,
  "baremetal:allocation:get": ALLOCATION_READER,
  "baremetal:allocation:list": API_READER,
  "baremetal:allocation:list_all": SYSTEM_READER,
  "baremetal:allocation:create": ALLOCATION_CREATOR,
  "baremetal:allocation:create_restricted": SYSTEM_MEMBER,
  "baremetal:allocation:delete": ALLOCATION_MEMBER,
  "baremetal:allocation:update": ALLOCATION_MEMBER,
  "baremetal:chassis:get": SYSTEM_READER,
  "baremetal:chassis:create": SYSTEM_ADMIN,
  "baremetal:chassis:delete": SYSTEM_ADMIN,
  "baremetal:chassis:update": SYSTEM_MEMBER,
  "baremetal:volume:get": SYSTEM_OR_PROJECT_READER,
  "baremetal:volume:list": API_READER,
  "baremetal:volume:list_all": SYSTEM_READER,
  "baremetal:volume:create": SYSTEM_MEMBER_OR_OWNER_LESSEE_ADMIN,
  "baremetal:volume:delete": SYSTEM_MEMBER_OR_OWNER_LESSEE_ADMIN,
  "baremetal:volume:update": SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN,
  "baremetal:volume:view_target_properties": TARGET_PROPERTIES_READER,
  "baremetal:deploy_template:get": SYSTEM_READER,
  "baremetal:deploy_template:create": SYSTEM_ADMIN,
  "baremetal:deploy_template:delete": SYSTEM_ADMIN,
  "baremetal:deploy_template:update": SYSTEM_ADMIN,
  "baremetal:runbook:get": RUNBOOK_READER,
  "baremetal:runbook:list": API_READER,
  "baremetal:runbook:list_all": SYSTEM_READER,
  "baremetal:runbook:create": RUNBOOK_CREATOR,
  "baremetal:runbook:delete": RUNBOOK_ADMIN,
  "baremetal:runbook:update": RUNBOOK_ADMIN,
  "baremetal:runbook:update:public": SYSTEM_MEMBER,
  "baremetal:runbook:update:owner": SYSTEM_MEMBER,
  "baremetal:runbook:use": RUNBOOK_ADMIN,
  "baremetal:inspection_rule:get": SYSTEM_READER,
  "baremetal:inspection_rule:list_all": SYSTEM_READER,
  "baremetal:inspection_rule:create": SYSTEM_ADMIN,
  "baremetal:inspection_rule:update": SYSTEM_ADMIN,
  "baremetal:inspection_rule:delete": SYSTEM_ADMIN,
  "baremetal:driver:get": API_READER,
  "baremetal:driver:get_properties": API_READER,
  "baremetal:conductor:get": SYSTEM_READER,
  "baremetal:shards:get": SYSTEM_READER,
  /** Anvil: the event stream names every node, so it is the fleet's. */
  "anvil:events:get": SYSTEM_READER,
  /** Anvil: Prometheus metrics on the API listener. */
  "anvil:metrics:get": SYSTEM_READER,
} satisfies Record<string, Check>;

export type PolicyName = keyof typeof RULES;

/** Whether `who` passes `rule` for `target` (pure). */
export function allowed(rule: PolicyName, who: Identity, target: PolicyTarget = {}): boolean {
  return RULES[rule](who, target);
}

/** Ironic's HTTPForbidden: answered as 403 with its message (the API's error handler reads statusCode). */
export class PolicyForbidden extends Error {
  readonly statusCode = 403;
  constructor(readonly rule: PolicyName) {
    super(`Access was denied to the following resource: ${rule}`);
    this.name = "PolicyForbidden";
  }
}

/** @throws PolicyForbidden */
export function authorize(rule: PolicyName, who: Identity, target: PolicyTarget = {}): void {
  if (!allowed(rule, who, target)) throw new PolicyForbidden(rule);
}
