import { z } from "zod";
import { isUuid } from "./uuid.ts";

/**
 * Inspection rules (Ironic 1.96, migrated from ironic-inspector): conditions over `{node, inventory,
 * plugin_data}` and actions on the node, applied by priority after inspection.
 */

/** Each operator's arguments, by name: required first, then optional (Ironic reads them off `__call__`). */
interface Signature {
  required: readonly string[];
  optional?: readonly string[];
  /** Arguments that get `{inventory[...]}` interpolation (Ironic's FORMATTED_ARGS). */
  formatted: readonly string[];
}

export const CONDITION_OPERATORS = {
  eq: { required: ["values"], optional: ["force_strings"], formatted: ["values"] },
  lt: { required: ["values"], optional: ["force_strings"], formatted: ["values"] },
  gt: { required: ["values"], optional: ["force_strings"], formatted: ["values"] },
  "is-empty": { required: ["value"], formatted: ["value"] },
  "in-net": { required: ["address", "subnet"], formatted: ["address", "subnet"] },
  matches: { required: ["value", "regex"], formatted: ["value"] },
  contains: { required: ["value", "regex"], formatted: ["value"] },
  "one-of": { required: ["value"], optional: ["values"], formatted: ["value"] },
  "is-none": { required: ["value"], formatted: ["value"] },
  "is-true": { required: ["value"], formatted: ["value"] },
  "is-false": { required: ["value"], formatted: ["value"] },
} as const satisfies Record<string, Signature>;
export type ConditionOperator = keyof typeof CONDITION_OPERATORS;

/**
 * Ironic's actions but `api-call` (an HTTP GET from the conductor to wherever a rule says: Anvil's conductor
 * sends traffic only where its operator configured it).
 */
export const ACTIONS = {
  fail: { required: ["msg"], formatted: [] },
  log: { required: ["msg"], optional: ["level"], formatted: ["msg"] },
  "set-attribute": { required: ["path", "value"], formatted: ["value"] },
  "extend-attribute": { required: ["path", "value"], optional: ["unique"], formatted: ["value"] },
  "del-attribute": { required: ["path"], formatted: [] },
  "set-capability": { required: ["name", "value"], formatted: ["value"] },
  "unset-capability": { required: ["name"], formatted: [] },
  "add-trait": { required: ["name"], formatted: [] },
  "remove-trait": { required: ["name"], formatted: [] },
  "set-plugin-data": { required: ["path", "value"], formatted: ["value"] },
  "extend-plugin-data": { required: ["path", "value"], optional: ["unique"], formatted: ["value"] },
  "unset-plugin-data": { required: ["path"], formatted: [] },
  "set-port-attribute": { required: ["port_id", "path", "value"], formatted: ["value"] },
  "extend-port-attribute": {
    required: ["port_id", "path", "value"],
    optional: ["unique"],
    formatted: ["value"],
  },
  "del-port-attribute": { required: ["port_id", "path"], formatted: [] },
} as const satisfies Record<string, Signature>;
export type ActionName = keyof typeof ACTIONS;

export const INSPECTION_PHASES = ["main"] as const;
export const MULTIPLE = ["any", "all", "first", "last"] as const;

const Args = z.union([z.array(z.unknown()), z.record(z.string(), z.unknown())]);

export const RuleCondition = z
  .object({
    op: z.string().max(64),
    args: Args,
    loop: Args.optional(),
    multiple: z.enum(MULTIPLE).optional(),
    /** ironic-inspector's spelling of `!op`; kept as given */
    invert: z.boolean().optional(),
  })
  .loose();
export type RuleCondition = z.infer<typeof RuleCondition>;

export const RuleAction = z.object({ op: z.string().max(64), args: Args, loop: Args.optional() }).loose();
export type RuleAction = z.infer<typeof RuleAction>;

/** A stored rule (Ironic's InspectionRule object, scope aside). */
export const InspectionRuleRecord = z.object({
  uuid: z.string(),
  description: z.string().nullable(),
  priority: z.number().int(),
  sensitive: z.boolean(),
  phase: z.string(),
  conditions: z.array(RuleCondition),
  actions: z.array(RuleAction),
  created_at: z.string(),
  updated_at: z.string().nullable(),
});
export type InspectionRuleRecord = z.infer<typeof InspectionRuleRecord>;

/** A rule as applied: stored ones and the conductor's built-in ones (which the API never lists). */
export type InspectionRule = Pick<
  InspectionRuleRecord,
  "uuid" | "description" | "priority" | "sensitive" | "phase" | "conditions" | "actions"
> & { built_in?: boolean };

/** "!eq", " ! eq " → ["eq", true]; two "!" are refused, as Ironic's parse_inverted_operator does. */
export function parseInvertedOperator(op: string): { op: string; inverted: boolean } {
  const trimmed = op.trim();
  if ((trimmed.match(/!/g) ?? []).length > 1)
    throw new Error(
      "Multiple exclamation marks are not allowed. To apply the invert of an operation, simply add an exclamation mark (with an optional space) before the operator, e.g. eq - !eq.",
    );
  const inverted = trimmed.startsWith("!");
  return { op: trimmed.replace(/^!/, "").trim(), inverted };
}

function signatureOf(kind: "condition" | "action", op: string): Signature | undefined {
  const table: Record<string, Signature> = kind === "condition" ? CONDITION_OPERATORS : ACTIONS;
  return Object.hasOwn(table, op) ? table[op] : undefined;
}

/**
 * An operator's `args` as named arguments: a list (Ironic's deprecated form) maps onto the required names,
 * then the optional ones. @throws Error with Ironic's text when a list is too short
 */
export function namedArgs(signature: Signature, args: unknown): Record<string, unknown> {
  if (!Array.isArray(args)) return { ...(args as Record<string, unknown>) };
  const optional = signature.optional ?? [];
  if (args.length < signature.required.length)
    throw new Error(
      `Not enough arguments provided. Missing: ${signature.required.slice(args.length).join(", ")}`,
    );
  const named: Record<string, unknown> = {};
  [...signature.required, ...optional].forEach((name, i) => {
    if (i < args.length) named[name] = args[i];
  });
  return named;
}

/** Ironic's Base.validate: required arguments present, no unexpected ones. Returns the problem, or null. */
function argumentProblem(signature: Signature, args: unknown): string | null {
  let named: Record<string, unknown>;
  try {
    named = namedArgs(signature, args);
  } catch (error) {
    return (error as Error).message;
  }
  const allowed = new Set([...signature.required, ...(signature.optional ?? []), "plugin_data"]);
  const missing = signature.required.filter((name) => !(name in named));
  const unexpected = Object.keys(named).filter((name) => !allowed.has(name));
  const parts = [];
  if (missing.length > 0) parts.push(`missing required argument(s): ${missing.join(", ")}`);
  if (unexpected.length > 0) parts.push(`unexpected argument(s): ${unexpected.join(", ")}`);
  return parts.length > 0 ? parts.join("; ") : null;
}

const conditionOps = [
  ...Object.keys(CONDITION_OPERATORS),
  ...Object.keys(CONDITION_OPERATORS).map((o) => `!${o}`),
];

/** A rule document as clients send it (Ironic's create_request_body). */
export const RuleBody = z
  .object({
    uuid: z.string().nullable().optional(),
    description: z.string().max(255).nullable().optional(),
    phase: z.string().max(16).nullable().optional(),
    priority: z.number().int().min(0).optional(),
    sensitive: z.boolean().nullable().optional(),
    conditions: z.array(RuleCondition).max(100).optional(),
    actions: z.array(RuleAction).min(1).max(100),
  })
  .strict();
export type RuleBody = z.infer<typeof RuleBody>;

/** Python's repr of a JSON value, as jsonschema's messages print it. */
function repr(value: unknown): string {
  if (typeof value === "string")
    return `'${value.slice(0, 200).replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (Array.isArray(value)) return `[${value.map(repr).join(", ")}]`;
  if (typeof value === "object")
    return `{${Object.entries(value)
      .map(([k, v]) => `${repr(k)}: ${repr(v)}`)
      .join(", ")}}`;
  return String(value);
}

/** jsonschema's wording for the first problem of a body RuleBody refuses (enough of it for clients to match). */
function schemaProblem(body: unknown): string | null {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    return `${repr(body)} is not of type 'object'`;
  const doc = body as Record<string, unknown>;
  const known = new Set(Object.keys(RuleBody.shape));
  const extra = Object.keys(doc).filter((k) => !known.has(k));
  if (extra.length > 0)
    return `Additional properties are not allowed (${extra.map(repr).join(", ")} ${extra.length === 1 ? "was" : "were"} unexpected)`;
  if (!("actions" in doc)) return "'actions' is a required property";
  const parsed = RuleBody.safeParse(body);
  if (parsed.success) {
    for (const action of parsed.data.actions)
      if (!Object.hasOwn(ACTIONS, action.op))
        return `${repr(action.op)} is not one of [${Object.keys(ACTIONS).map(repr).join(", ")}]`;
    for (const condition of parsed.data.conditions ?? [])
      if (!conditionOps.includes(condition.op.trim()) && !conditionOps.includes(condition.op))
        return `${repr(condition.op)} is not one of [${conditionOps.map(repr).join(", ")}]`;
    return null;
  }
  const issue = parsed.error.issues[0]!;
  let value: unknown = doc;
  for (const key of issue.path)
    value = (value as Record<PropertyKey, unknown> | undefined)?.[key as PropertyKey];
  if (issue.code === "too_small" && Array.isArray(value)) return `${repr(value)} is too short`;
  if (issue.code === "too_big" && Array.isArray(value)) return `${repr(value)} is too long`;
  if (issue.code === "too_big" && typeof value === "string") return `${repr(value)} is too long`;
  if (issue.code === "too_small" && typeof value === "number")
    return `${repr(value)} is less than the minimum of 0`;
  if (issue.code === "invalid_type" && issue.path.length === 0)
    return `${repr(body)} is not of type 'object'`;
  if (issue.code === "invalid_value" && issue.path.at(-1) === "multiple")
    return `${repr(value)} is not one of ['any', 'all', 'first', 'last']`;
  if (issue.code === "invalid_type" && value === undefined)
    return `${repr(String(issue.path.at(-1)))} is a required property`;
  return `${repr(value)} is not valid: ${issue.message}`;
}

export type ValidatedRule = {
  uuid?: string;
  description: string | null;
  phase: string;
  priority: number;
  sensitive: boolean;
  conditions: RuleCondition[];
  actions: RuleAction[];
};

/**
 * Ironic's validate_rule: the schema, then the phase, the priority range of user rules and each operator's
 * arguments. Built-in rules may have any priority.
 * @throws Error with Ironic's message (the API turns it into 400)
 */
export function validateRule(body: unknown, options: { builtIn?: boolean } = {}): ValidatedRule {
  const problem = schemaProblem(body);
  if (problem !== null) throw new RuleInvalid(`Validation failed for inspection rule: ${problem}`);
  const rule = RuleBody.parse(body);
  const errors: string[] = [];
  const phase = rule.phase ?? "main";
  if (!(INSPECTION_PHASES as readonly string[]).includes(phase))
    errors.push(`Invalid phase: ${phase}. Valid phases are: ${INSPECTION_PHASES.join(", ")}`);
  const priority = rule.priority ?? 0;
  if (priority > 9999 && !options.builtIn)
    errors.push("Priority must be between 0 and 9999 for user-defined rules.");
  if (typeof rule.uuid === "string" && !isUuid(rule.uuid))
    errors.push(`Expected UUID for uuid: ${rule.uuid}`);
  for (const condition of rule.conditions ?? []) {
    let op: string;
    try {
      op = parseInvertedOperator(condition.op).op;
    } catch (error) {
      errors.push((error as Error).message);
      continue;
    }
    const signature = signatureOf("condition", op);
    if (!signature) {
      errors.push(`Unsupported condition operator: ${op}`);
      continue;
    }
    const bad = argumentProblem(signature, condition.args);
    if (bad) errors.push(`Invalid parameters for condition operator ${op}: ${bad}`);
  }
  for (const action of rule.actions) {
    const signature = signatureOf("action", action.op);
    if (!signature) {
      errors.push(`Unsupported action operator: ${action.op}`);
      continue;
    }
    const bad = argumentProblem(signature, action.args);
    if (bad) errors.push(`Invalid parameters for action operator ${action.op}: ${bad}`);
  }
  if (errors.length === 1) throw new RuleInvalid(errors[0]!);
  if (errors.length > 1) throw new RuleInvalid(`Multiple validation errors occurred: ${errors.join("; ")}`);
  return {
    ...(typeof rule.uuid === "string" ? { uuid: rule.uuid } : {}),
    description: rule.description ?? null,
    phase,
    priority,
    sensitive: rule.sensitive ?? false,
    conditions: rule.conditions ?? [],
    actions: rule.actions,
  };
}

/** A rule document Ironic's validate_rule refuses. */
export class RuleInvalid extends Error {}

export function conditionSignature(op: string): Signature | undefined {
  return signatureOf("condition", op);
}

export function actionSignature(op: string): Signature | undefined {
  return signatureOf("action", op);
}
