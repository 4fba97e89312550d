import { z } from "zod";

/**
 * Ironic's step model: clean, deploy and service steps are declared by a hardware type's interfaces
 * (conductor side) or by the agent (in-band), and run in priority order, highest first. Priority 0 means
 * "only when asked for" (manual cleaning, or deploy_steps given with a deploy).
 */
export const STEP_INTERFACES = ["deploy", "raid", "management", "power", "boot", "bios", "inspect"] as const;
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
