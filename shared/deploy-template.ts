import { z } from "zod";
import { Trait } from "./api.ts";
import { JsonObject } from "./resources.ts";
import { StepInterfaceSchema } from "./steps.ts";
import { UUID_PATTERN } from "./uuid.ts";

/**
 * One step of a deploy template (Ironic's DEPLOY_STEP_SCHEMA): every key required; priority 0 disables the
 * step, and Ironic accepts it as a digit string too (normalised to a number here).
 */
export const DeployTemplateStep = z
  .object({
    interface: StepInterfaceSchema,
    step: z
      .string()
      .min(1)
      .max(128)
      .regex(/^[a-z_][a-z0-9_]*$/, "a step name is lower_snake_case"),
    args: JsonObject,
    priority: z.union([
      z.number().int().min(0).max(1000),
      z
        .string()
        .regex(/^[0-9]+$/, "a priority is a non-negative integer")
        .transform(Number)
        .pipe(z.number().int().max(1000)),
    ]),
  })
  .strict();
export type DeployTemplateStep = z.infer<typeof DeployTemplateStep>;

/** Ironic's duplicate_steps: one interface/step pair at most once per template. */
function noDuplicateSteps(steps: readonly DeployTemplateStep[], ctx: z.RefinementCtx): void {
  const seen = new Set<string>();
  const duplicates = new Set<string>();
  for (const s of steps) {
    const key = `interface: ${s.interface}, step: ${s.step}`;
    if (seen.has(key)) duplicates.add(key);
    seen.add(key);
  }
  if (duplicates.size > 0) {
    ctx.addIssue({
      code: "custom",
      message: `Duplicate deploy steps. A template cannot have multiple deploy steps with the same interface and step. Duplicates: ${[...duplicates].join("; ")}`,
    });
  }
}

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
