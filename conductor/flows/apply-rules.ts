import { readFile } from "node:fs/promises";
import { isDeepStrictEqual } from "node:util";
import { parse as parseYaml } from "yaml";
import { type InspectionRule, RuleInvalid, validateRule } from "../../shared/inspection-rule.ts";
import type { Inventory } from "../../shared/inventory.ts";
import { type JsonObject, NodeRecord, PortRecord } from "../../shared/resources.ts";
import type { Task } from "../tasks/task.ts";
import { applyInspectionRules, InspectionRuleFailure, RuleExecutionError } from "./rule-engine.ts";

/** Ironic's _synthetic_rule_uuid: built-in rules without a uuid are numbered. */
const syntheticUuid = (index: number): string =>
  `00000000-0000-0000-0000-${index.toString(16).padStart(12, "0")}`;

/**
 * The built-in rules of a YAML file (Ironic's get_built_in_rules): a list of rules, each validated as the
 * API does but with any priority. @throws Error naming the file and the rule that is wrong
 */
export async function loadBuiltInRules(path: string | undefined): Promise<InspectionRule[]> {
  if (!path) return [];
  const data: unknown = parseYaml(await readFile(path, "utf8"));
  if (!Array.isArray(data)) throw new Error(`Built-in rules file (${path}) should contain a list of rules`);
  let synthetic = 0;
  return data.map((raw: unknown, index) => {
    try {
      const rule = validateRule(raw, { builtIn: true });
      return { ...rule, uuid: rule.uuid ?? syntheticUuid(synthetic++), built_in: true };
    } catch (error) {
      const why = error instanceof RuleInvalid ? error.message : String(error);
      throw new Error(`Error parsing built-in rule ${index} of ${path}: ${why}`);
    }
  });
}

/** The top-level fields of `after` that differ from `before`, each checked against the record's schema. */
function changedFields<T extends Record<string, unknown>>(
  before: T,
  after: T,
  shape: Record<string, { safeParse(v: unknown): { success: boolean } }>,
): Partial<T> {
  const patch: Record<string, unknown> = {};
  for (const key of Object.keys(after)) {
    if (isDeepStrictEqual(before[key], after[key])) continue;
    if (!shape[key]?.safeParse(after[key]).success)
      throw new RuleExecutionError(`an inspection rule set '${key}' to a value it cannot hold`);
    patch[key] = after[key];
  }
  return patch as Partial<T>;
}

/**
 * Applies the API's rules of phase "main" and the built-in ones to the task's node after inspection (Ironic's
 * engine.apply_rules), then writes what they changed: node fields, ports, plugin data (returned).
 * @throws Error "Failed to inspect hardware. Reason: …" on a `fail` action or a rule that cannot run
 */
export async function applyRules(
  task: Task,
  inventory: Inventory,
  pluginData: JsonObject,
): Promise<JsonObject> {
  const { store, config } = task.deps;
  const rules: InspectionRule[] = [
    ...(await store.listInspectionRules({ phase: "main" }, {})),
    ...(await loadBuiltInRules(config.inspectionRules.builtInRules)),
  ];
  if (rules.length === 0) return pluginData;
  const ports = await store.listPorts({ node_uuid: task.node.uuid }, {});
  const subject = {
    node: structuredClone(task.node),
    ports: structuredClone(ports),
    inventory: structuredClone(inventory) as Record<string, unknown>,
    pluginData: structuredClone(pluginData),
    log: (level: "debug" | "info" | "warn" | "error", message: string) =>
      task.log[level]({ rule: true }, message),
  };
  try {
    const applied = applyInspectionRules(rules, subject, config.inspectionRules.maskSecrets);
    task.log.info({ applied, rules: rules.length }, "inspection rules applied");
  } catch (error) {
    if (error instanceof InspectionRuleFailure || error instanceof RuleExecutionError)
      throw new Error(`Failed to inspect hardware. Reason: ${error.message}`);
    throw error;
  }
  const nodePatch = changedFields(task.node, subject.node, NodeRecord.shape);
  if (Object.keys(nodePatch).length > 0) await task.update(nodePatch);
  for (const port of subject.ports) {
    const before = ports.find((p) => p.uuid === port.uuid)!;
    const patch = changedFields(before, port, PortRecord.shape);
    if (Object.keys(patch).length > 0) await store.updatePort(port.uuid, patch);
  }
  return subject.pluginData;
}
