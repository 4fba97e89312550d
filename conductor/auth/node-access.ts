import type { AllocationRecord, NodeRecord } from "../../shared/resources.ts";
import { requireStrictBool } from "../../shared/strict-bool.ts";
import { NodeNotFound, NotFound } from "../db/store.ts";
import { Invalid } from "../errors.ts";
import type { Identity } from "./identity.ts";
import { PolicyForbidden, allowed, authorize, type PolicyName, type PolicyTarget } from "./policy.ts";

const nodeTarget = (node: Pick<NodeRecord, "owner" | "lessee">): PolicyTarget => ({
  owner: node.owner,
  lessee: node.lessee,
});

/**
 * Ironic's check_node_policy_and_retrieve: a missing node is 404 only for those the rule would let in with no
 * node at all (system users), else 403; a node the caller may not even see is 404 (existence hidden); a node
 * it sees but may not act on is 403. Every rule in `rules` must pass.
 * @throws NodeNotFound, PolicyForbidden
 */
export async function checkNodePolicies(
  getNode: (ident: string) => Promise<NodeRecord | null>,
  who: Identity,
  request: { ident: string; rules: readonly PolicyName[] },
): Promise<NodeRecord> {
  const [first = "baremetal:node:get"] = request.rules;
  const node = await getNode(request.ident);
  if (!node) {
    authorize(first, who);
    throw new NodeNotFound(request.ident);
  }
  const target = nodeTarget(node);
  if (!allowed("baremetal:node:get", who, target)) throw new NodeNotFound(request.ident);
  for (const rule of request.rules) authorize(rule, who, target);
  return node;
}

/** Ironic's check_owner_policy for a node already in hand (a port's node). @throws PolicyForbidden */
export function checkNodeRule(
  rule: PolicyName,
  who: Identity,
  node: Pick<NodeRecord, "owner" | "lessee">,
): void {
  authorize(rule, who, nodeTarget(node));
}

/**
 * A node named in a filter or a field (`?node=`, an allocation's node): one the caller may not see is
 * answered exactly as one that does not exist, so the answer tells nothing about other projects' nodes.
 * @throws NodeNotFound (404; callers that answer 400 for a bad field catch it)
 */
export async function visibleNode(
  deps: { store: { getNode(ident: string): Promise<NodeRecord | null> } },
  who: Identity,
  ident: string,
): Promise<NodeRecord> {
  const node = await deps.store.getNode(ident);
  if (!node || !canSeeNode(who, node)) throw new NodeNotFound(ident);
  return node;
}

/**
 * Ironic's authorize_node_link: moving a resource (a port) to another node needs `rule` on the new node too,
 * and the new node must be visible and have the same owner; every refusal has one text, the one a missing
 * node gets, so it does not tell whether the node exists. @throws Invalid (400), PolicyForbidden
 */
export async function authorizeNodeLink(
  deps: { store: { getNode(ident: string): Promise<NodeRecord | null> } },
  access: { who: Identity; rule: PolicyName },
  link: { from: Pick<NodeRecord, "owner" | "lessee">; to: string; field?: string },
): Promise<NodeRecord> {
  const invalid = new Invalid(
    `Unable to apply the requested ${link.field ?? "node_uuid"} '${link.to}'. Requested value was invalid.`,
  );
  const node = await deps.store.getNode(link.to);
  if (!node || !canSeeNode(access.who, node)) throw invalid;
  if ((node.owner ?? null) !== (link.from.owner ?? null)) throw invalid;
  checkNodeRule(access.rule, access.who, node);
  return node;
}

/** Whether the caller may see the node at all (baremetal:node:get). */
export function canSeeNode(who: Identity, node: Pick<NodeRecord, "owner" | "lessee">): boolean {
  return allowed("baremetal:node:get", who, nodeTarget(node));
}

/**
 * Ironic's check_list_policy: who may list everything gets `requested` (an explicit owner filter, or none);
 * a project user gets their project, and asking for another project's list is 403.
 * @returns the project the list is limited to, or undefined for the whole fleet
 * @throws PolicyForbidden
 */
export function listScope(
  kind: "node" | "port" | "portgroup" | "allocation" | "volume" | "runbook",
  who: Identity,
  requested?: string,
): { project?: string } {
  const all = `baremetal:${kind}:list_all` as const;
  if (allowed(all, who)) return {};
  if (who.project === null || (requested !== undefined && requested !== who.project))
    throw new PolicyForbidden(all);
  authorize(`baremetal:${kind}:list`, who);
  return { project: who.project };
}

/**
 * Ironic's check_allocation_policy_and_retrieve: a missing allocation is 404 for those the rule lets in with
 * no target, else 403; someone else's allocation is 403. @throws NotFound, PolicyForbidden
 */
export function checkAllocationPolicy(
  rule: PolicyName,
  who: Identity,
  request: { ident: string; allocation: AllocationRecord | null },
): AllocationRecord {
  if (!request.allocation) {
    authorize(rule, who);
    throw new NotFound(`Allocation ${request.ident} could not be found.`);
  }
  authorize(rule, who, { allocationOwner: request.allocation.owner });
  return request.allocation;
}

const LAST_ERROR = "** Value Redacted - Requires baremetal:node:get:last_error permission. **";
const RESERVATION = "** Redacted - requires baremetal:node:get:reservation permission. **";
const INTERNAL = { content: "** Redacted - Requires baremetal:node:get:driver_internal_info permission. **" };
const DRIVER_INFO = { content: "** Redacted - requires baremetal:node:get:driver_info permission. **" };

/** node_sanitize's fields, each with the rule that lets a caller see it and the note it reads as otherwise. */
const SANITIZED: readonly (readonly [string, PolicyName, string | { content: string }])[] = [
  ["last_error", "baremetal:node:get:last_error", LAST_ERROR],
  ["reservation", "baremetal:node:get:reservation", RESERVATION],
  ["driver_internal_info", "baremetal:node:get:driver_internal_info", INTERNAL],
  ["driver_info", "baremetal:node:get:driver_info", DRIVER_INFO],
];

/**
 * Ironic's node_sanitize for callers below baremetal:node:get:filter_threshold (project users): the fields
 * among last_error, reservation, driver_internal_info and driver_info whose own rule fails, each with the
 * note (a fresh value) it reads as. Empty for callers who see everything.
 */
export function nodeRedactions(
  who: Identity,
  node: Pick<NodeRecord, "owner" | "lessee">,
): [field: string, note: string | { content: string }][] {
  const target = nodeTarget(node);
  if (allowed("baremetal:node:get:filter_threshold", who, target)) return [];
  return SANITIZED.filter(([, rule]) => !allowed(rule, who, target)).map(([field, , note]) => [
    field,
    typeof note === "string" ? note : { ...note },
  ]);
}

/**
 * Ironic's node_sanitize (nodeRedactions) on a view: each redacted field it has is replaced by its note.
 * Changes `view` in place and returns it.
 */
export function redactNodeView<V extends Record<string, unknown>>(
  view: V,
  who: Identity,
  node: Pick<NodeRecord, "owner" | "lessee">,
): V {
  const out = view as Record<string, unknown>;
  for (const [field, note] of nodeRedactions(who, node)) if (field in out) out[field] = note;
  return view;
}

/**
 * Ironic's per-field PATCH rules (_authorize_patch_and_get_node): one rule per touched field kind.
 * @throws InvalidBoolean (400) for an automated_clean value that is not a boolean
 */
export function patchRules(patch: readonly { op?: string; path: string; value?: unknown }[]): PolicyName[] {
  const rules = new Set<PolicyName>();
  let generic = false;
  const prefixed: [string, PolicyName][] = [
    ["/instance_info", "baremetal:node:update_instance_info"],
    // 1.104: the instance's name goes with its info, as Ironic's rule table has it
    ["/instance_name", "baremetal:node:update_instance_info"],
    ["/extra", "baremetal:node:update_extra"],
    ["/driver_info", "baremetal:node:update:driver_info"],
    ["/properties", "baremetal:node:update:properties"],
    ["/chassis_uuid", "baremetal:node:update:chassis_uuid"],
    ["/instance_uuid", "baremetal:node:update:instance_uuid"],
    ["/lessee", "baremetal:node:update:lessee"],
    ["/owner", "baremetal:node:update:owner"],
    ["/network_data", "baremetal:node:update:network_data"],
    ["/conductor_group", "baremetal:node:update:conductor_group"],
    ["/name", "baremetal:node:update:name"],
    ["/retired", "baremetal:node:update:retired"],
    ["/shard", "baremetal:node:update:shard"],
    ["/parent_node", "baremetal:node:update:parent_node"],
    ["/disable_power_off", "baremetal:node:update:disable_power_off"],
  ];
  for (const op of patch) {
    // read with the same strict parser the field itself is stored with: whatever is stored as false was
    // authorised as disabling cleaning; a value it cannot read is the same 400 the field would get
    const disablesCleaning =
      op.path.startsWith("/automated_clean") &&
      op.op !== "remove" &&
      op.value !== null &&
      !requireStrictBool("automated_clean", op.value);
    if (disablesCleaning) {
      rules.add("baremetal:node:disable_cleaning");
      continue;
    }
    const match = prefixed.find(([prefix]) => op.path.startsWith(prefix));
    if (match) rules.add(match[1]);
    else if (op.path === "/driver" || /^\/[a-z]+_interface$/.test(op.path))
      rules.add("baremetal:node:update:driver_interfaces");
    else generic = true;
  }
  if (generic || rules.size === 0) rules.add("baremetal:node:update");
  return [...rules];
}
