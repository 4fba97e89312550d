import { z } from "zod";

/**
 * What deploy templates (1.55) and runbooks (1.92) share: both are named lists of steps kept for later, checked
 * by Ironic with the same pieces (a step name, a rank that may come as a digit string, no step twice).
 */

export const StoredStepName = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[a-z_][a-z0-9_]*$/, "a step name is lower_snake_case");

/** A template's priority or a runbook's order: a non-negative integer, or its digit string (normalised). */
export function stepRank(what: "priority" | "order") {
  return z.union([
    z.number().int().min(0).max(1000),
    z
      .string()
      .regex(/^[0-9]+$/, `a ${what} is a non-negative integer`)
      .transform(Number)
      .pipe(z.number().int().max(1000)),
  ]);
}

/**
 * Ironic's duplicate_steps: one interface/step pair at most once per template or runbook (Ironic says "deploy
 * steps" and "template" for both).
 */
export function noDuplicateSteps(
  steps: readonly { interface: string; step: string }[],
  ctx: z.RefinementCtx,
): void {
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
