import type { z } from "zod";
import { maskSecrets } from "../../shared/secrets.ts";
import { badRequest, pyRepr } from "./errors.ts";

/**
 * What the deploy template (1.55) and runbook (1.92) endpoints share: both keep a trait-named list of steps,
 * validated by Ironic with a jsonschema whose texts clients match, and shown with step secrets masked.
 */

/** Fields kept as free JSON (bounded by the API's stored-JSON limits). */
export const STEP_LIST_JSON_FIELDS = ["extra", "steps"];

/**
 * Parses a POST body with `schema`; a refusal Ironic's jsonschema would word its own way ("Schema error for
 * template: …" / "… for runbook: …", with the root cause of an `anyOf`, "is too short", "Expected UUID for
 * uuid") gets that text, other issues keep the shared wording. @throws Invalid, ZodError
 */
export function parseStepListBody<T>(schema: z.ZodType<T>, body: unknown, what: "template" | "runbook"): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const raw = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  for (const issue of parsed.error.issues) {
    const field = issue.path[0];
    if (issue.path.length !== 1 || typeof field !== "string") continue;
    const value = raw[field];
    if (field === "name" && typeof value === "string" && issue.code === "too_big")
      throw badRequest(`Schema error for ${what}: ${pyRepr(value)} is too long`);
    if (field === "name" && typeof value === "string" && value.length > 0)
      throw badRequest(
        `Schema error for ${what}: ${pyRepr(value)} is not valid under any of the given schemas. Possible root cause: ${pyRepr(value)} does not match '^CUSTOM_[A-Z0-9_]+$'`,
      );
    if (field === "steps" && Array.isArray(value) && value.length === 0)
      throw badRequest(`Schema error for ${what}: [] is too short`);
    if (field === "uuid" && typeof value === "string") throw badRequest(`Expected UUID for uuid: ${value}`);
  }
  throw parsed.error;
}

/** Ironic's step_sanitize: secrets in step arguments are masked. */
export function maskedSteps<S extends { args: Record<string, unknown> }>(steps: readonly S[]): S[] {
  return steps.map((s) => ({ ...s, args: maskSecrets(s.args) }));
}
