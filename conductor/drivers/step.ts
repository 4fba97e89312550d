import { z } from "zod";
import { argsinfoOf } from "../../shared/agent-steps.ts";
import type { AgentStep, ArgsSchema } from "../../shared/agent-steps.ts";
import type { CommandArgs } from "../../shared/protocol.ts";
import type { StepDescriptor, StepInterface, StepKind } from "../../shared/steps.ts";
import { Invalid } from "../errors.ts";
import { agentCommand } from "./agent-command.ts";
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
      argsinfo: argsinfoOf(definition.args),
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

/** What the conductor does for an agent step; absent, the default sends the step's command. */
export type AgentStepRun = (task: Task, args: StepArgs) => Promise<void>;

/**
 * A step of the agent catalogue, as a driver interface declares it: kind, name, priority, abortable and
 * argument schema come from the catalogue, so the conductor's descriptor is the one the agent reports.
 * `run` is the conductor's side of the step; by default the step's arguments go to its command as they are
 * and the command's result is kept in driver_internal_info as `<step>_result`.
 * `priority` is the conductor's configured one (Ironic's [deploy] *_priority), which wins over the agent's.
 */
export function agentStep(
  declared: AgentStep,
  options: { run?: AgentStepRun; priority?: number | undefined; inBand?: boolean } = {},
): Step {
  return defineStep({
    kind: declared.kind,
    interface: declared.interface,
    step: declared.step,
    priority: options.priority ?? declared.priority,
    ...(options.priority === undefined ? {} : { conductorPriority: true }),
    abortable: declared.abortable ?? false,
    inBand: options.inBand ?? true,
    args: declared.args,
    run: options.run ?? ((task, args) => sendCommand(task, declared, args)),
  });
}

async function sendCommand(task: Task, declared: AgentStep, args: StepArgs): Promise<void> {
  // NOTE: a step without args of its own takes its command's (the catalogue resolves them so), already parsed
  // by that schema when the step was requested; the agent checks them once more, as every command's.
  const result = await agentCommand(task, {
    name: declared.command,
    args: args as CommandArgs<typeof declared.command>,
  });
  await task.mergeInternalInfo({ [`${declared.step}_result`]: result });
}
