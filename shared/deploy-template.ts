import { z } from "zod";
import { Trait } from "./api.ts";
import { JsonObject } from "./resources.ts";
import { StepInterfaceSchema } from "./steps.ts";
import { StoredStepName, noDuplicateSteps, stepRank } from "./stored-steps.ts";
import { UUID_PATTERN } from "./uuid.ts";

/**
 * One step of a deploy template (Ironic's DEPLOY_STEP_SCHEMA): every key required; priority 0 disables the
 * step, and Ironic accepts it as a digit string too (normalised to a number here).
 */
export const DeployTemplateStep = z
  .object({
    interface: StepInterfaceSchema,
    step: StoredStepName,
    args: JsonObject,
    priority: stepRank("priority"),
  })
  .strict();
export type DeployTemplateStep = z.infer<typeof DeployTemplateStep>;

export const DeployTemplateSteps = z.array(DeployTemplateStep).min(1).max(100).superRefine(noDuplicateSteps);

/** A deploy template: when a node's instance traits name it, its steps join the node's deploy. */
export const DeployTemplateRecord = z.object({
  uuid: z.string(),
  /** a trait: standard or CUSTOM_… */
  name: Trait,
  steps: DeployTemplateSteps,
  extra: JsonObject,
  created_at: z.string(),
  updated_at: z.string().nullable(),
});
export type DeployTemplateRecord = z.infer<typeof DeployTemplateRecord>;

/** POST /v1/deploy_templates (Ironic's TEMPLATE_SCHEMA at 1.55). */
export const DeployTemplateCreateBody = z
  .object({
    uuid: z.string().regex(UUID_PATTERN, "Expected a UUID").nullable().optional(),
    name: Trait,
    steps: DeployTemplateSteps,
    extra: JsonObject.nullable().optional(),
  })
  .strict();
export type DeployTemplateCreateBody = z.infer<typeof DeployTemplateCreateBody>;
