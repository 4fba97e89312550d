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
 * A runbook name from 1.112 (Ironic's RUNBOOK_NAME_SCHEMA): RFC 3986 unreserved characters, so it can be
 * named in a URL path; 1.92's trait names are a subset.
 */
export const RunbookName = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[A-Za-z0-9\-._~]+$/, "A runbook name is 1-255 letters, digits and '-._~'");

/**
 * A runbook (1.92): named steps an operator runs as a manual clean or a service. Which nodes may run it: from
 * 1.112 those carrying one of its traits; for older clients those whose traits include its name. An owned
 * runbook is its project's; a public one anyone may read.
 */
export const RunbookRecord = z.object({
  uuid: z.string(),
  /** a trait below 1.112 (CUSTOM_… or standard), any RunbookName from 1.112 */
  name: RunbookName,
  /** 1.112: what it shows below 1.112 is left out; documents older than it read as null */
  description: z.string().max(255).nullable().default(null),
  /** 1.112: the traits a node carries one of to run it (set by /traits only; migration 1.112 seeded names) */
  traits: z.array(Trait).default([]),
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
 * POST /v1/runbooks from 1.112 (Ironic's RUNBOOK_MUTATION_SCHEMA_V112): any RunbookName, a description; no
 * traits (those are set through /v1/runbooks/{ident}/traits).
 */
export const RunbookCreateBody112 = RunbookCreateBody.extend({
  name: RunbookName,
  description: z.string().max(255).nullable().optional(),
}).strict();
export type RunbookCreateBody112 = z.infer<typeof RunbookCreateBody112>;

/**
 * A runbook's steps as a provision request's clean_steps or service_steps: by order (stable, so equal orders
 * keep the runbook's sequence), without the order key.
 */
export function runbookRequestSteps(steps: readonly RunbookStep[]) {
  return [...steps]
    .sort((a, b) => a.order - b.order)
    .map((s) => ({ interface: s.interface, step: s.step, args: s.args }));
}
