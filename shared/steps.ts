import { z } from "zod";

/**
 * Ironic's step model: clean, deploy and service steps are declared by a hardware type's interfaces
 * (conductor side) or by the agent (in-band), and run in priority order, highest first. Priority 0 means
 * "only when asked for" (manual cleaning, or deploy_steps given with a deploy).
 */
// NOTE: Ironic's list (conductor/steps.py CLEANING_INTERFACE_PRIORITY): boot and inspect declare no steps, so a
// step naming them is refused at the API.
export const STEP_INTERFACES = [
  "deploy",
  "raid",
  "management",
  "power",
  "bios",
  "firmware",
  "vendor",
] as const;
export type StepInterface = (typeof STEP_INTERFACES)[number];
export const StepInterfaceSchema = z.enum(STEP_INTERFACES);

export const STEP_KINDS = ["clean", "deploy", "service"] as const;
export type StepKind = (typeof STEP_KINDS)[number];

const StepName = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[a-z_][a-z0-9_]*$/, "a step name is lower_snake_case");

export const ArgInfoSchema = z.object({
  description: z.string().max(1024),
  required: z.boolean().optional(),
});

/** A step as a driver interface or the agent declares it (what GET …/clean_steps shows). */
export const StepDescriptorSchema = z.object({
  interface: StepInterfaceSchema,
  step: StepName,
  priority: z.number().int().min(0).max(1000),
  argsinfo: z.record(z.string(), ArgInfoSchema).nullable().optional(),
  abortable: z.boolean().default(false),
  reboot_requested: z.boolean().default(false),
  /** Whether the step runs in the deploy ramdisk (through the agent). */
  requires_ramdisk: z.boolean().default(true),
});
export type StepDescriptor = z.infer<typeof StepDescriptorSchema>;

/** A step an operator asks for (`clean_steps` / `deploy_steps` in a provision request). */
export const RequestedStepSchema = z
  .object({
    interface: StepInterfaceSchema,
    step: StepName,
    args: z.record(z.string(), z.unknown()).optional(),
    priority: z.number().int().min(0).max(1000).optional(),
  })
  .strict();
export type RequestedStep = z.infer<typeof RequestedStepSchema>;

/** The step being run, as recorded on the node (`clean_step` / `deploy_step`). */
export const RunningStepSchema = z.object({
  interface: StepInterfaceSchema,
  step: StepName,
  args: z.record(z.string(), z.unknown()).default({}),
  priority: z.number().int().min(0).max(1000).optional(),
});
export type RunningStep = z.infer<typeof RunningStepSchema>;

/**
 * A step of a node's plan, as the conductor records it (`clean_step` / `deploy_step` while it runs, and the
 * list in driver_internal_info so a resume continues where the plan stopped).
 */
export const PlannedStepSchema = RunningStepSchema.extend({
  priority: z.number().int().min(0).max(1000),
  abortable: z.boolean().default(false),
  requires_ramdisk: z.boolean().default(true),
  /** set by an abort request while a step that cannot be interrupted runs: stop once it completes */
  abort_after: z.boolean().optional(),
});
export type PlannedStep = z.infer<typeof PlannedStepSchema>;

/** Steps the conductor handles itself whatever the interface (Ironic's reserved step names). */
export const RESERVED_STEPS = ["hold"] as const;
