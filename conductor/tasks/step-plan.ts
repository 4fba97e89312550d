import { z } from "zod";
import {
  RESERVED_STEPS,
  RequestedStepSchema,
  type PlannedStep,
  type StepDescriptor,
  type StepInterface,
  type StepKind,
} from "../../shared/steps.ts";
import type { NodeInterfaces } from "../drivers/hardware-type.ts";
import type { Step } from "../drivers/step.ts";
import { Invalid } from "../errors.ts";

/**
 * Ties between steps of equal priority: the interface with the higher value runs first (Ironic's
 * CLEANING_INTERFACE_PRIORITY, the same for deploy steps).
 */
const INTERFACE_PRIORITY: Record<StepInterface, number> = {
  vendor: 7,
  power: 6,
  management: 5,
  firmware: 4,
  deploy: 3,
  bios: 2,
  raid: 1,
};

/** `interface.step`, as messages name a step. */
export function stepId(step: { interface: string; step: string }): string {
  return `${step.interface}.${step.step}`;
}

/** Highest priority first; ties by interface priority; otherwise the given order. Pure. */
export function sortSteps<T extends { priority: number; interface: StepInterface }>(
  steps: readonly T[],
): T[] {
  return [...steps].sort(
    (a, b) => b.priority - a.priority || INTERFACE_PRIORITY[b.interface] - INTERFACE_PRIORITY[a.interface],
  );
}

/** Every step of one kind the node's interfaces declare. */
export function declaredSteps(interfaces: NodeInterfaces, kind: StepKind): Step[] {
  return [...interfaces.deploy.steps, ...interfaces.raid.steps, ...(interfaces.managementSteps ?? [])].filter(
    (s) => s.kind === kind,
  );
}

export function findStep(
  steps: readonly Step[],
  wanted: { interface: string; step: string },
): Step | undefined {
  return steps.find((s) => s.descriptor.interface === wanted.interface && s.descriptor.step === wanted.step);
}

function planned(
  step: Step,
  args: Record<string, unknown>,
  priority = step.descriptor.priority,
): PlannedStep {
  return {
    interface: step.descriptor.interface,
    step: step.descriptor.step,
    args,
    priority,
    abortable: step.descriptor.abortable,
    requires_ramdisk: step.descriptor.requires_ramdisk,
  };
}

/** The steps that run when nobody asked for any: priority above 0, in order. Pure. */
export function automatedPlan(steps: readonly Step[]): PlannedStep[] {
  return sortSteps(steps.filter((s) => s.descriptor.priority > 0).map((s) => planned(s, {})));
}

/**
 * Checks the steps an operator asked for (clean_steps, deploy_steps) against the node's steps: known step,
 * known arguments of the right shape, required ones present, no ramdisk step when the ramdisk is disabled.
 * Returns them in the order given, ready to record. Pure. @throws Invalid listing every problem
 */
export function validateRequested(
  requested: readonly unknown[],
  steps: readonly Step[],
  options: { kind: StepKind; disableRamdisk?: boolean },
): PlannedStep[] {
  const { kind } = options;
  const errors: string[] = [];
  const result: PlannedStep[] = [];
  for (const [index, raw] of requested.entries()) {
    const parsed = RequestedStepSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const what =
        issue?.code === "unrecognized_keys"
          ? `unexpected keys ${issue.keys.join(", ")}`
          : `${issue?.path.join(".") || "step"}: ${issue?.message ?? "invalid"}`;
      errors.push(`${kind} step ${index + 1} is not valid: ${what}`);
      continue;
    }
    const wanted = parsed.data;
    if ((RESERVED_STEPS as readonly string[]).includes(wanted.step)) {
      result.push({
        ...wanted,
        args: wanted.args ?? {},
        priority: wanted.priority ?? 0,
        abortable: true,
        requires_ramdisk: false,
      });
      continue;
    }
    const step = findStep(steps, wanted);
    if (!step) {
      errors.push(`node does not support this ${kind} step: ${stepId(wanted)}`);
      continue;
    }
    try {
      const args = step.parseArgs(wanted.args ?? {});
      if (options.disableRamdisk && step.descriptor.requires_ramdisk) {
        errors.push(`${kind} step ${stepId(wanted)} requires booting a ramdisk`);
        continue;
      }
      result.push(planned(step, args, wanted.priority ?? step.descriptor.priority));
    } catch (error) {
      errors.push(error instanceof Error ? error.message : String(error));
    }
  }
  if (errors.length) throw new Invalid(errors.join("; "));
  return result;
}

/**
 * A deploy's plan: the automated steps, with the operator's deploy_steps added or overriding their priority
 * (priority 0 disables a step), in order. Pure.
 */
export function deployPlan(steps: readonly Step[], user: readonly PlannedStep[]): PlannedStep[] {
  const same = (a: PlannedStep, b: PlannedStep): boolean => a.interface === b.interface && a.step === b.step;
  const defaults = automatedPlan(steps).filter((d) => !user.some((u) => same(u, d)));
  return sortSteps([...defaults, ...user.filter((u) => u.priority > 0)]);
}

const ReportedStep = z
  .object({
    interface: z.string(),
    step: z.string(),
    priority: z.number().int().min(0).max(1000),
    abortable: z.boolean().optional(),
  })
  .loose();

/** The agent's answer to get_clean_steps / get_deploy_steps: a list, or `{clean_steps: [...]}` (IPA's shape). */
export function parseReportedSteps(
  raw: unknown,
  kind: StepKind,
): Pick<StepDescriptor, "interface" | "step" | "priority" | "abortable">[] {
  const list = Array.isArray(raw)
    ? raw
    : typeof raw === "object" && raw !== null
      ? (raw as Record<string, unknown>)[`${kind}_steps`]
      : undefined;
  if (!Array.isArray(list)) return [];
  const steps = [];
  for (const entry of list) {
    const parsed = ReportedStep.safeParse(entry);
    if (!parsed.success) continue;
    const { interface: iface, step, priority, abortable } = parsed.data;
    if (!(iface in INTERFACE_PRIORITY)) continue;
    steps.push({ interface: iface as StepInterface, step, priority, abortable: abortable ?? false });
  }
  return steps;
}

/**
 * Merges what the agent reports with what the conductor declared: an in-band step the agent does not list is
 * dropped; one it lists takes the agent's priority (unless the conductor's configuration set it) and abortable
 * flag. Conductor-side steps stay. Pure.
 */
export function mergeAgentSteps(
  steps: readonly Step[],
  reported: ReturnType<typeof parseReportedSteps> | null,
): Step[] {
  if (reported === null) return [...steps];
  const merged: Step[] = [];
  for (const step of steps) {
    if (!step.inBand) {
      merged.push(step);
      continue;
    }
    const agent = reported.find(
      (r) => r.interface === step.descriptor.interface && r.step === step.descriptor.step,
    );
    if (!agent) continue;
    merged.push({
      ...step,
      descriptor: {
        ...step.descriptor,
        priority: step.conductorPriority ? step.descriptor.priority : agent.priority,
        abortable: agent.abortable,
      },
    });
  }
  return merged;
}
