import { z } from "zod";
import { PlannedStepSchema, type PlannedStep, type RequestedStep } from "../../shared/steps.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import type { Store } from "../db/store.ts";
import type { Step } from "../drivers/step.ts";
import { Invalid } from "../errors.ts";
import { validateRequested } from "./step-plan.ts";

/** driver_internal_info key: the steps of the deploy templates matched when the deploy was asked for. */
export const TEMPLATE_STEPS_KEY = "deploy_template_steps";

/** The node's instance traits (instance_info.traits, which Nova sets from the flavor), as a list of names. */
function instanceTraits(node: Pick<NodeRecord, "instance_info">): string[] {
  const traits = node.instance_info.traits;
  return Array.isArray(traits) ? traits.filter((t): t is string => typeof t === "string") : [];
}

/**
 * Ironic's _get_validated_steps_from_templates: the steps of every deploy template whose name is one of the
 * node's instance traits, checked against the node's deploy steps (known step, arguments of the right shape).
 * @returns the entries to record on the node (the key removed when no template matches)
 * @throws Invalid with Ironic's wording, naming the templates
 */
export async function deployTemplateEntries(
  store: Pick<Store, "listDeployTemplatesByNames">,
  node: Pick<NodeRecord, "instance_info">,
  steps: readonly Step[],
): Promise<Record<string, unknown>> {
  const templates = await store.listDeployTemplatesByNames(instanceTraits(node));
  if (templates.length === 0) return { [TEMPLATE_STEPS_KEY]: undefined };
  const requested = templates.flatMap((t) =>
    t.steps.map((s) => ({ interface: s.interface, step: s.step, args: s.args, priority: s.priority })),
  );
  try {
    return { [TEMPLATE_STEPS_KEY]: validateRequested(requested, steps, { kind: "deploy" }) };
  } catch (error) {
    const names = templates.map((t) => t.name).join(",");
    throw new Invalid(
      `Validation of deploy steps from deploy templates matching this node's instance traits failed. Matching deploy templates: ${names}. Errors: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/** The template steps recorded on a node, in the shape they were asked in (to check again at plan time). */
export function templateStepsOf(info: Record<string, unknown>): RequestedStep[] {
  const parsed = z.array(PlannedStepSchema).safeParse(info[TEMPLATE_STEPS_KEY]);
  if (!parsed.success) return [];
  return parsed.data.map((s) => ({
    interface: s.interface,
    step: s.step,
    args: s.args,
    priority: s.priority,
  }));
}

/**
 * Ironic's _get_all_deployment_steps: the operator's deploy_steps win over a template's step of the same
 * interface and name; the rest of the templates' steps join them. Pure.
 */
export function withTemplateSteps(
  user: readonly PlannedStep[],
  templates: readonly PlannedStep[],
): PlannedStep[] {
  const taken = new Set(user.map((s) => `${s.interface}.${s.step}`));
  return [...user, ...templates.filter((s) => !taken.has(`${s.interface}.${s.step}`))];
}

/**
 * Why a deploy of `node` would need to boot from a volume, which Anvil cannot do (its only storage interface
 * is `noop`): it has a boot volume (a target with boot_index 0) and no image to write. Null when it needs not.
 */
export async function bootFromVolumeProblem(
  store: Pick<Store, "listVolumeTargets">,
  node: Pick<NodeRecord, "uuid" | "instance_info" | "storage_interface">,
): Promise<string | null> {
  const image = node.instance_info.image_source;
  if (typeof image === "string" && image !== "") return null;
  const targets = await store.listVolumeTargets({ node_uuid: node.uuid }, {});
  if (!targets.some((t) => t.boot_index === 0)) return null;
  return `Node ${node.uuid} has a boot volume target but no instance_info/image_source: booting from a volume is not supported (storage_interface "${node.storage_interface}"); set an image to deploy.`;
}
