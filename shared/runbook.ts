import { z } from "zod";
import { Trait } from "./api.ts";
import { JsonObject } from "./resources.ts";
import { StepInterfaceSchema } from "./steps.ts";
import { StoredStepName, noDuplicateSteps, stepRank } from "./stored-steps.ts";
import { UUID_PATTERN } from "./uuid.ts";

/** One step of a runbook (Ironic's RUNBOOK_STEP_SCHEMA): an order instead of a priority, args optional. */
export const RunbookStep = z
  .object({
    interface: StepInterfaceSchema,
    step: StoredStepName,
    args: JsonObject.default({}),
    order: stepRank("order"),
  })
  .strict();
export type RunbookStep = z.infer<typeof RunbookStep>;

export const RunbookSteps = z.array(RunbookStep).min(1).max(100).superRefine(noDuplicateSteps);

/**
 * A runbook (1.92): named steps an operator runs by name as a manual clean or a service, on the nodes whose
 * traits include the runbook's name. An owned runbook is its project's; a public one anyone may read.
 */
export const RunbookRecord = z.object({
  uuid: z.string(),
  /** a trait: standard or CUSTOM_…; a node must carry it to run the runbook */
  name: Trait,
  steps: RunbookSteps,
  disable_ramdisk: z.boolean(),
  extra: JsonObject,
  public: z.boolean(),
  owner: z.string().max(255).nullable(),
  created_at: z.string(),
  updated_at: z.string().nullable(),
});
export type RunbookRecord = z.infer<typeof RunbookRecord>;

/** POST /v1/runbooks (Ironic's RUNBOOK_SCHEMA at 1.92). */
export const RunbookCreateBody = z
  .object({
    uuid: z.string().regex(UUID_PATTERN, "Expected a UUID").nullable().optional(),
    name: Trait,
    steps: RunbookSteps,
    disable_ramdisk: z.boolean().nullable().optional(),
    extra: JsonObject.nullable().optional(),
    public: z.boolean().nullable().optional(),
    owner: z.string().max(255).nullable().optional(),
  })
  .strict();
export type RunbookCreateBody = z.infer<typeof RunbookCreateBody>;

/**
 * A runbook's steps as a provision request's clean_steps or service_steps: by order (stable, so equal orders
 * keep the runbook's sequence), without the order key.
 */
export function runbookRequestSteps(steps: readonly RunbookStep[]) {
  return [...steps]
    .sort((a, b) => a.order - b.order)
    .map((s) => ({ interface: s.interface, step: s.step, args: s.args }));
}
