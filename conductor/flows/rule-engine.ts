import { BlockList, isIP } from "node:net";
import { isDeepStrictEqual } from "node:util";
import { Trait } from "../../shared/api.ts";
import {
  type InspectionRule,
  type RuleAction,
  type RuleCondition,
  actionSignature,
  conditionSignature,
  namedArgs,
  parseInvertedOperator,
} from "../../shared/inspection-rule.ts";
import { FormatError, pyFormat, pyStr } from "../../shared/py-format.ts";
import type { NodeRecord, PortRecord } from "../../shared/resources.ts";
import { mergeCapabilities, removeCapability } from "./inspection-results.ts";

/**
 * Ironic's inspection rule engine over plain data: conditions read `{node, inventory, plugin_data}`, actions
 * change working copies of the node, its ports and the plugin data; the caller persists what changed.
 */

/** What rules see and change. `node` and `ports` are copies the engine edits in place. */
export interface RuleSubject {
  node: NodeRecord;
  ports: PortRecord[];
  inventory: Record<string, unknown>;
  pluginData: Record<string, unknown>;
  log(level: "debug" | "info" | "warn" | "error", message: string): void;
}

/** A rule's `fail` action: inspection ends in `inspect failed` with this text (Ironic's HardwareInspectionFailure). */
export class InspectionRuleFailure extends Error {}

/** Anything else that goes wrong while a rule runs (Ironic's RuleActionExecutionFailure and kin). */
export class RuleExecutionError extends Error {}

/** Ironic's SENSITIVE_FIELDS: shown to rules as "***" (mask_secrets "always", or "sensitive" for other rules). */
const SENSITIVE_FIELDS = new Set(["password", "auth_token", "bmc_password"]);

export type MaskSecrets = "always" | "never" | "sensitive";

function masked(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(masked);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, SENSITIVE_FIELDS.has(k) ? "***" : masked(v)]),
  );
}

/** Fields a rule may not set: identity, state, locks and the conductor's own bookkeeping. */
const PROTECTED_NODE_FIELDS = new Set([
  ...[
    "uuid",
    "created_at",
    "updated_at",
    "provision_state",
    "target_provision_state",
    "provision_updated_at",
  ],
  ...["power_state", "target_power_state", "reservation", "driver_internal_info", "instance_uuid"],
  ...["allocation_uuid", "inspection_started_at", "inspection_finished_at", "clean_step", "deploy_step"],
  ...["service_step", "console_enabled", "fault", "driver", "last_error"],
]);
const PROTECTED_PORT_FIELDS = new Set(["uuid", "address", "node_uuid", "created_at", "updated_at"]);

/** Ironic's normalize_path: "/a/b" or "a.b" → ["a", "b"]. */
function pathParts(path: unknown): string[] {
  if (typeof path !== "string" || path.trim() === "")
    throw new RuleExecutionError(`invalid path: ${pyStr(path)}`);
  const parts = path.includes("/") ? path.replace(/^\/+|\/+$/g, "").split("/") : path.split(".");
  if (parts.some((p) => p === "__proto__" || p === "constructor" || p === "prototype"))
    throw new RuleExecutionError(`invalid path: ${path}`);
  return parts;
}

type Dict = Record<string, unknown>;
const isDict = (v: unknown): v is Dict => v !== null && typeof v === "object" && !Array.isArray(v);

/** Python's `setdefault` walk: the dict at parts[0..-1], created where missing. @throws when a step is not a dict */
function parentOf(root: Dict, parts: readonly string[]): Dict {
  let current = root;
  for (const part of parts.slice(0, -1)) {
    if (!Object.hasOwn(current, part)) current[part] = {};
    const next = current[part];
    if (!isDict(next)) throw new RuleExecutionError(`'${part}' is not a dictionary`);
    current = next;
  }
  return current;
}

// ---------------------------------------------------------------------------------------------------------
// interpolation

interface Scope {
  node: NodeRecord;
  inventory: unknown;
  plugin_data: unknown;
  item?: unknown;
}

/** Ironic's interpolate_variables: strings formatted, dict keys and values and list items recursively. */
function interpolate(value: unknown, scope: Scope, op: string): unknown {
  // NOTE: in a loop Ironic formats a string twice, so an item may hold a template ("{inventory[...]}")
  if (typeof value === "string" && "item" in scope) {
    const once = formatText(value, scope, op);
    return typeof once === "string" ? formatText(once, scope, op) : once;
  }
  if (typeof value === "string") return formatText(value, scope, op);
  if (Array.isArray(value)) return value.map((v) => interpolate(v, scope, op));
  if (isDict(value))
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [interpolate(k, scope, op) as string, interpolate(v, scope, op)]),
    );
  return value;
}

/** One Python format of a string: the text kept when a lookup fails (None for is-empty's missing key). */
function formatText(value: string, scope: Scope, op: string): string | null {
  try {
    return pyFormat(value, scope as unknown as Dict, new Set(["node"]));
  } catch (error) {
    if (!(error instanceof FormatError)) throw error;
    // NOTE: Ironic treats a missing field as no value for is-empty, and keeps the text otherwise
    if (error.kind === "KeyError" && op === "is-empty") return null;
    return value;
  }
}

/** The named arguments of an operation, the formatted ones interpolated (all of them inside a loop). */
function argsOf(
  operation: RuleCondition | RuleAction,
  kind: "condition" | "action",
  scope: Scope,
): { op: string; inverted: boolean; args: Dict } {
  const { op, inverted } = parseInvertedOperator(operation.op);
  const signature = kind === "condition" ? conditionSignature(op) : actionSignature(op);
  if (!signature)
    throw new RuleExecutionError(`Unsupported ${kind === "condition" ? "operator" : "action"}: '${op}'`);
  let named: Dict;
  try {
    named = namedArgs(signature, operation.args);
  } catch (error) {
    throw new RuleExecutionError((error as Error).message);
  }
  const inLoop = "item" in scope;
  const formatted = new Set<string>(signature.formatted);
  const args = Object.fromEntries(
    Object.entries(named).map(([k, v]) => [k, inLoop || formatted.has(k) ? interpolate(v, scope, op) : v]),
  );
  const invertFlag = kind === "condition" && (operation as RuleCondition).invert === true;
  return { op, inverted: inverted !== invertFlag, args };
}

// ---------------------------------------------------------------------------------------------------------
// conditions

/** Python's `<` for JSON values. @throws RuleExecutionError as Python's TypeError */
function pyLess(a: unknown, b: unknown, symbol: string): boolean {
  const num = (v: unknown) => typeof v === "number" || typeof v === "boolean";
  if (num(a) && num(b)) return Number(a) < Number(b);
  if (typeof a === "string" && typeof b === "string") return a < b;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      if (pyEqual(a[i], b[i])) continue;
      return pyLess(a[i], b[i], symbol);
    }
    return a.length < b.length;
  }
  const type = (v: unknown) =>
    v === null
      ? "NoneType"
      : Array.isArray(v)
        ? "list"
        : typeof v === "object"
          ? "dict"
          : typeof v === "string"
            ? "str"
            : typeof v === "boolean"
              ? "bool"
              : Number.isInteger(v)
                ? "int"
                : "float";
  throw new RuleExecutionError(
    `'${symbol}' not supported between instances of '${type(a)}' and '${type(b)}'`,
  );
}

function pyEqual(a: unknown, b: unknown): boolean {
  if ((typeof a === "number" || typeof a === "boolean") && (typeof b === "number" || typeof b === "boolean"))
    return Number(a) === Number(b);
  return isDeepStrictEqual(a, b);
}

function pairwise(args: Dict, op: string, test: (a: unknown, b: unknown) => boolean): boolean {
  const values = args.values;
  if (!Array.isArray(values))
    throw new RuleExecutionError(
      `Failed to check condition: '${op}' on values: ${pyStr(values)}: Expected list for 'values', got: ${values === null ? "NoneType" : typeof values === "object" ? "dict" : typeof values}`,
    );
  const list = args.force_strings === true ? values.map(pyStr) : values;
  for (let i = 0; i + 1 < list.length; i++) if (!test(list[i], list[i + 1])) return false;
  return true;
}

/** A Python regular expression as JavaScript's (the common subset). @throws RuleExecutionError */
function regexOf(source: unknown, anchored: boolean): RegExp {
  if (typeof source !== "string")
    throw new RuleExecutionError(`invalid regular expression: ${pyStr(source)}`);
  try {
    const body = anchored && !source.endsWith("$") ? `${source}$` : source;
    return new RegExp(anchored ? `^(?:${body})` : body, "u");
  } catch (error) {
    throw new RuleExecutionError(`invalid regular expression: ${(error as Error).message}`);
  }
}

function inNet(address: unknown, subnet: unknown): boolean {
  const [network = "", prefix, ...more] = String(subnet).split("/");
  const family = isIP(network);
  const bits = prefix === undefined ? (family === 6 ? 128 : 32) : Number(prefix);
  const max = family === 6 ? 128 : 32;
  if (family === 0 || more.length > 0 || !Number.isInteger(bits) || bits < 0 || bits > max)
    throw new RuleExecutionError(`invalid value: invalid IPNetwork ${pyStr(subnet)}`);
  const addressFamily = isIP(String(address));
  if (addressFamily === 0)
    throw new RuleExecutionError(`failed to detect a valid IP address from ${pyRepr(address)}`);
  if (addressFamily !== family) return false;
  const list = new BlockList();
  const type = family === 6 ? "ipv6" : "ipv4";
  list.addSubnet(network, bits, type);
  return list.check(String(address), type);
}

function pyRepr(value: unknown): string {
  return typeof value === "string" ? `'${value}'` : pyStr(value);
}

function checkOne(op: string, args: Dict): boolean {
  switch (op) {
    case "eq":
      return pairwise(args, op, pyEqual);
    case "lt":
      return pairwise(args, op, (a, b) => pyLess(a, b, "<"));
    case "gt":
      return pairwise(args, op, (a, b) => pyLess(b, a, ">"));
    case "is-empty":
      return ["", "None", "[]", "{}"].includes(pyStr(args.value));
    case "in-net":
      return inNet(args.address, args.subnet);
    case "matches":
      return regexOf(args.regex, true).test(pyStr(args.value));
    case "contains":
      return regexOf(args.regex, false).test(pyStr(args.value));
    case "one-of": {
      const values = args.values ?? [];
      if (typeof values === "string") return typeof args.value === "string" && values.includes(args.value);
      if (!Array.isArray(values))
        throw new RuleExecutionError(`argument of type '${typeof values}' is not iterable`);
      return values.some((v) => pyEqual(v, args.value));
    }
    case "is-none":
      return args.value === null || args.value === undefined;
    case "is-true": {
      const v = args.value;
      if (typeof v === "boolean" || typeof v === "number") return Boolean(v);
      return typeof v === "string" && ["yes", "true"].includes(v.toLowerCase());
    }
    case "is-false": {
      const v = args.value;
      if (typeof v === "boolean" || typeof v === "number") return !v;
      if (typeof v === "string") return ["no", "false"].includes(v.toLowerCase());
      return v === null || v === undefined;
    }
    default:
      throw new RuleExecutionError(`Unsupported operator: '${op}'`);
  }
}

function checkCondition(condition: RuleCondition, scope: Scope): boolean {
  const { op, inverted, args } = argsOf(condition, "condition", scope);
  if ("item" in scope && ["eq", "lt", "gt"].includes(op)) args.force_strings = true;
  const result = checkOne(op, args);
  return inverted ? !result : result;
}

/** Ironic's check_with_loop: each loop item in turn, combined as `multiple` says (any, all, first, last). */
function checkWithLoop(condition: RuleCondition, scope: Scope): boolean {
  const loop = condition.loop;
  if (loop === undefined || (Array.isArray(loop) ? loop.length === 0 : Object.keys(loop).length === 0))
    return checkCondition(condition, scope);
  const multiple = condition.multiple ?? "any";
  if (!Array.isArray(loop)) return checkCondition(condition, { ...scope, item: loop });
  const results: boolean[] = [];
  for (const item of loop) {
    const result = checkCondition(condition, { ...scope, item });
    if (multiple === "first" && result) return true;
    if (multiple === "last") results.length = 0;
    results.push(result);
  }
  if (multiple === "any") return results.some(Boolean);
  if (multiple === "all") return results.every(Boolean);
  return results[0] ?? false;
}

// ---------------------------------------------------------------------------------------------------------
// actions

function setIn(root: Dict, parts: readonly string[], value: unknown): void {
  parentOf(root, parts)[parts.at(-1)!] = value;
}

function extendIn(root: Dict, parts: readonly string[], item: { value: unknown; unique: unknown }): void {
  const { value, unique } = item;
  const parent = parentOf(root, parts);
  const key = parts.at(-1)!;
  if (!Object.hasOwn(parent, key)) parent[key] = [];
  const list = parent[key];
  if (!Array.isArray(list))
    throw new RuleExecutionError(
      `Cannot extend non-list attribute ${parts.join(".")} with value ${pyStr(value)}`,
    );
  if (unique !== true || !list.some((v) => isDeepStrictEqual(v, value))) list.push(value);
}

function deleteIn(root: Dict, parts: readonly string[]): void {
  let current: unknown = root;
  for (const part of parts.slice(0, -1)) {
    if (!isDict(current) || !Object.hasOwn(current, part)) throw new RuleExecutionError(`'${part}'`);
    current = current[part];
  }
  const key = parts.at(-1)!;
  if (!isDict(current) || !Object.hasOwn(current, key)) throw new RuleExecutionError(`'${key}'`);
  delete current[key];
}

/** set/extend/del on a record's field path (node or port); a whole field may only be a settable one. */
function editRecord(
  record: Dict,
  protectedFields: ReadonlySet<string>,
  edit: { kind: "set" | "extend" | "del"; path: unknown; value?: unknown; unique?: unknown },
): void {
  const parts = pathParts(edit.path);
  const field = parts[0]!;
  if (protectedFields.has(field) || !Object.hasOwn(record, field))
    throw new RuleExecutionError(`'${field}' can not be changed by an inspection rule`);
  if (edit.kind === "set") setIn(record, parts, edit.value);
  else if (edit.kind === "extend") extendIn(record, parts, { value: edit.value, unique: edit.unique });
  else if (parts.length === 1) record[field] = isDict(record[field]) ? {} : null;
  else deleteIn(record, parts);
}

function portOf(subject: RuleSubject, id: unknown): PortRecord {
  const port = subject.ports.find((p) => p.uuid === id);
  if (!port) throw new RuleExecutionError(`Port ${pyStr(id)} could not be found.`);
  return port;
}

function runAction(op: string, args: Dict, subject: RuleSubject): void {
  const node = subject.node as unknown as Dict;
  const failed = (what: string, error: unknown) =>
    new RuleExecutionError(`Failed to ${what}: ${error instanceof Error ? error.message : String(error)}`);
  try {
    switch (op) {
      case "fail":
        throw new InspectionRuleFailure(pyStr(args.msg));
      case "log": {
        const level = String(args.level ?? "info").toLowerCase();
        const levels = {
          debug: "debug",
          info: "info",
          warning: "warn",
          error: "error",
          critical: "error",
        } as const;
        if (!Object.hasOwn(levels, level)) throw new RuleExecutionError(`Invalid log level: ${level}`);
        subject.log(levels[level as keyof typeof levels], pyStr(args.msg));
        return;
      }
      case "set-attribute":
        return editRecord(node, PROTECTED_NODE_FIELDS, { kind: "set", path: args.path, value: args.value });
      case "extend-attribute":
        return editRecord(node, PROTECTED_NODE_FIELDS, {
          kind: "extend",
          path: args.path,
          value: args.value,
          unique: args.unique,
        });
      case "del-attribute":
        return editRecord(node, PROTECTED_NODE_FIELDS, { kind: "del", path: args.path });
      case "set-capability":
        subject.node.properties.capabilities = mergeCapabilities(subject.node.properties.capabilities, {
          [pyStr(args.name)]: pyStr(args.value),
        });
        return;
      case "unset-capability":
        subject.node.properties.capabilities = removeCapability(
          subject.node.properties.capabilities,
          pyStr(args.name),
        );
        return;
      case "add-trait": {
        const trait = Trait.safeParse(args.name);
        if (!trait.success) throw new RuleExecutionError(`invalid trait ${pyStr(args.name)}`);
        if (!subject.node.traits.includes(trait.data)) subject.node.traits.push(trait.data);
        return;
      }
      case "remove-trait": {
        const index = subject.node.traits.indexOf(String(args.name));
        if (index >= 0) subject.node.traits.splice(index, 1);
        else subject.log("warn", `Failed to remove trait ${pyStr(args.name)}: not set on the node`);
        return;
      }
      case "set-plugin-data":
        return setIn(subject.pluginData, pathParts(args.path), args.value);
      case "extend-plugin-data":
        return extendIn(subject.pluginData, pathParts(args.path), { value: args.value, unique: args.unique });
      case "unset-plugin-data":
        try {
          deleteIn(subject.pluginData, pathParts(args.path));
        } catch {
          subject.log("warn", `Path ${pyStr(args.path)} not found`);
        }
        return;
      case "set-port-attribute":
      case "extend-port-attribute":
      case "del-port-attribute": {
        const port = portOf(subject, args.port_id) as unknown as Dict;
        const kind = op === "set-port-attribute" ? "set" : op === "extend-port-attribute" ? "extend" : "del";
        return editRecord(port, PROTECTED_PORT_FIELDS, {
          kind,
          path: args.path,
          value: args.value,
          unique: args.unique,
        });
      }
      default:
        throw new RuleExecutionError(`Unsupported action: '${op}'`);
    }
  } catch (error) {
    if (error instanceof InspectionRuleFailure) throw error;
    throw failed(`apply action ${op}`, error);
  }
}

function applyAction(action: RuleAction, scope: Scope, subject: RuleSubject): void {
  const loop = action.loop;
  const items =
    loop === undefined || (Array.isArray(loop) ? loop.length === 0 : Object.keys(loop).length === 0)
      ? null
      : Array.isArray(loop)
        ? loop
        : [loop];
  for (const item of items ?? [undefined]) {
    const itemScope = items === null ? scope : { ...scope, item };
    const { op, args } = argsOf(action, "action", itemScope);
    runAction(op, args, subject);
  }
}

/**
 * Ironic's apply_rules: the rules by priority, highest first (ties in the given order); each whose conditions
 * all hold runs its actions in order. Conditions see secrets masked as `mask` says.
 * @throws InspectionRuleFailure (a `fail` action), RuleExecutionError (anything else a rule got wrong)
 */
export function applyInspectionRules(
  rules: readonly InspectionRule[],
  subject: RuleSubject,
  mask: MaskSecrets = "always",
): string[] {
  const applied: string[] = [];
  const ordered = [...rules].sort((a, b) => b.priority - a.priority);
  for (const rule of ordered) {
    const hide = mask === "always" || (mask === "sensitive" && !rule.sensitive);
    const scope: Scope = {
      node: subject.node,
      inventory: hide ? masked(subject.inventory) : subject.inventory,
      plugin_data: hide ? masked(subject.pluginData) : subject.pluginData,
    };
    try {
      if (!rule.conditions.every((condition) => checkWithLoop(condition, scope))) continue;
      subject.log("info", `Applying actions for rule ${rule.uuid}`);
      for (const action of rule.actions) applyAction(action, scope, subject);
      applied.push(rule.uuid);
    } catch (error) {
      if (error instanceof InspectionRuleFailure) throw error;
      const message = error instanceof Error ? error.message : String(error);
      throw new RuleExecutionError(`Failed to apply rule ${rule.uuid}: ${message}`);
    }
  }
  return applied;
}
