import { z } from "zod";
import type { StepDescriptor, StepInterface, StepKind } from "../../shared/steps.ts";
import { Invalid } from "../errors.ts";
import type { DriverTask as Task } from "./task-context.ts";

/** Step arguments as they travel (API body, driver_internal_info). */
export type StepArgs = Record<string, unknown>;

/**
 * A step a driver interface declares (Ironic's `@clean_step` / `@deploy_step`): its descriptor, its argument
 * schema (checked once, when the step is requested) and what it does.
 */
export interface Step {
  kind: StepKind;
  descriptor: StepDescriptor;
  /** True when the agent executes it (its name must then be listed by the agent's get_*_steps). */
  inBand: boolean;
  /** How long it may run before the runner fails it; absent: the conductor's agent command timeout. */
  timeoutMs?: number;
  /**
   * The conductor's configuration set this step's priority: it wins over the priority the agent reports
   * (Ironic's override_priorities, e.g. [deploy] delete_configuration_priority).
   */
  conductorPriority?: boolean;
  /** @throws Invalid naming the step and what is wrong with its arguments */
  parseArgs(args: StepArgs): StepArgs;
  run(task: Task, args: StepArgs): Promise<void>;
}

type ArgsSchema = z.ZodObject<z.ZodRawShape>;

/** Describes a step once: argsinfo is derived from the zod schema (descriptions, optional or required). */
export function defineStep<S extends ArgsSchema>(definition: {
  kind: StepKind;
  interface: StepInterface;
  step: string;
  priority: number;
  abortable?: boolean;
  requiresRamdisk?: boolean;
  inBand?: boolean;
  timeoutMs?: number;
  conductorPriority?: boolean;
  args: S;
  run(task: Task, args: z.infer<S>): Promise<void>;
}): Step {
  const argsinfo: NonNullable<StepDescriptor["argsinfo"]> = {};
  for (const [name, field] of Object.entries(definition.args.shape)) {
    const type = field as z.ZodType;
    argsinfo[name] = { description: type.description ?? name, required: !type.safeParse(undefined).success };
  }
  const id = `${definition.interface}.${definition.step}`;
  const parseArgs = (args: StepArgs): z.infer<S> => {
    const unexpected = Object.keys(args).filter((key) => !Object.hasOwn(definition.args.shape, key));
    if (unexpected.length) {
      throw new Invalid(
        `${definition.kind} step ${id} has these unexpected arguments: ${unexpected.join(", ")}`,
      );
    }
    const parsed = definition.args.safeParse(args);
    if (parsed.success) return parsed.data;
    const problems = parsed.error.issues.map(
      (issue) => `${issue.path.join(".") || "args"}: ${issue.message}`,
    );
    throw new Invalid(`${definition.kind} step ${id} has invalid arguments: ${problems.join("; ")}`);
  };
  return {
    kind: definition.kind,
    descriptor: {
      interface: definition.interface,
      step: definition.step,
      priority: definition.priority,
      argsinfo: Object.keys(argsinfo).length ? argsinfo : null,
      abortable: definition.abortable ?? false,
      reboot_requested: false,
      requires_ramdisk: definition.requiresRamdisk ?? definition.inBand ?? false,
    },
    inBand: definition.inBand ?? false,
    timeoutMs: definition.timeoutMs,
    ...(definition.conductorPriority ? { conductorPriority: true } : {}),
    parseArgs,
    run: (task, args) => definition.run(task, parseArgs(args)),
  };
}

export const NoArgs = z.object({});
