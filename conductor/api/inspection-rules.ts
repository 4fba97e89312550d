import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { JsonPatch } from "../../shared/api.ts";
import {
  type InspectionRuleRecord,
  type RuleAction,
  type RuleCondition,
  RuleInvalid,
  validateRule,
} from "../../shared/inspection-rule.ts";
import { isUuid } from "../../shared/uuid.ts";
import { authorize } from "../auth/policy.ts";
import { ConductorError } from "../errors.ts";
import { type ApiDeps, baseUrl } from "./context.ts";
import { badRequest, notFound } from "./errors.ts";
import { applyJsonPatch } from "./json-patch.ts";
import { checkStoredJson } from "./limits.ts";
import { documentRoutes, sendCreated, systemRules } from "./document-routes.ts";
import { PageQuery } from "./query.ts";
import { resourceView } from "./resource-view.ts";

/** Ironic's MINOR_96_INSPECTION_RULES. */
export const INSPECTION_RULES_VERSION = 96;

const LIST_FIELDS = ["uuid", "priority", "phase", "description"];
const SORTABLE = ["id", "uuid", "phase", "created_at"];
const PATCH_RULES = {
  writable: new Set(["description", "priority", "phase", "sensitive", "conditions", "actions"]),
  // NOTE: conditions and actions are lists; naming one item's key (/actions/0/args) is allowed
  objectFields: new Set(["conditions", "actions"]),
};
const JSON_FIELDS = ["conditions", "actions"];

const RuleListQuery = PageQuery.extend({ phase: z.string().max(16).optional() }).strict();

type IdentParams = { Params: { ident: string } };

/** Ironic's convert_conditions/convert_actions: op and args, loop when set, `multiple` only with a loop. */
function shownCondition(condition: RuleCondition): Record<string, unknown> {
  const loop = condition.loop !== undefined && !isEmpty(condition.loop);
  return {
    op: condition.invert === true ? `!${condition.op.replace(/^\s*!\s*/, "")}` : condition.op,
    args: condition.args,
    ...(loop ? { loop: condition.loop, multiple: condition.multiple ?? "any" } : {}),
  };
}

function shownAction(action: RuleAction): Record<string, unknown> {
  const loop = action.loop !== undefined && !isEmpty(action.loop);
  return { op: action.op, args: action.args, ...(loop ? { loop: action.loop } : {}) };
}

function isEmpty(value: unknown): boolean {
  return Array.isArray(value) ? value.length === 0 : Object.keys(value as object).length === 0;
}

/** Ironic's rules_sanitize: a sensitive rule's conditions and actions are never shown. */
function shown(rule: InspectionRuleRecord): Record<string, unknown> {
  return {
    uuid: rule.uuid,
    description: rule.description,
    priority: rule.priority,
    sensitive: rule.sensitive,
    phase: rule.phase,
    conditions: rule.sensitive ? null : rule.conditions.map(shownCondition),
    actions: rule.sensitive ? null : rule.actions.map(shownAction),
    created_at: rule.created_at,
    updated_at: rule.updated_at,
  };
}

/** validate_rule's failures are 400s with its text. @throws Invalid */
function checked(body: unknown): ReturnType<typeof validateRule> {
  try {
    return validateRule(body);
  } catch (error) {
    if (error instanceof RuleInvalid) throw badRequest(error.message);
    throw error;
  }
}

async function loadRule(deps: ApiDeps, ident: string): Promise<InspectionRuleRecord> {
  // NOTE: Ironic's parameter schema wants a UUID; a name never finds a rule either way
  const rule = isUuid(ident) ? await deps.store.getInspectionRule(ident.toLowerCase()) : null;
  if (!rule) throw notFound(`Inspection rule ${ident} could not be found.`);
  return rule;
}

/** Inspection rules (Ironic 1.96): conditions on inspection data and actions on the node. */
export function inspectionRulesPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    const view = (request: FastifyRequest, rule: InspectionRuleRecord, fields?: readonly string[]) =>
      resourceView(shown(rule), { fields, base: baseUrl(request), path: `inspection_rules/${rule.uuid}` });

    documentRoutes(app, {
      since: { minor: INSPECTION_RULES_VERSION, what: "inspection rules" },
      path: "inspection_rules",
      query: RuleListQuery,
      sortable: SORTABLE,
      listFields: LIST_FIELDS,
      authorize: systemRules("inspection_rule"),
      list: (_scope, query, page) =>
        deps.store.listInspectionRules(query.phase === undefined ? {} : { phase: query.phase }, page),
      find: (_request, ident) => loadRule(deps, ident),
      remove: (rule) => deps.store.deleteInspectionRule(rule.uuid),
      view,
    });

    app.post("/v1/inspection_rules", async (request, reply) => {
      authorize("baremetal:inspection_rule:create", request.identity);
      const body = checked(request.body);
      checkStoredJson(body, JSON_FIELDS, deps.config.api);
      const uuid = body.uuid?.toLowerCase() ?? randomUUID();
      if (await deps.store.getInspectionRule(uuid))
        throw new ConductorError(409, `An inspection rule with UUID ${uuid} already exists.`);
      const rule = await deps.store.createInspectionRule({
        ...body,
        uuid,
        created_at: new Date().toISOString(),
        updated_at: null,
      });
      await sendCreated(request, reply, { path: `inspection_rules/${rule.uuid}`, view: view(request, rule) });
    });

    app.patch<IdentParams>("/v1/inspection_rules/:ident", async (request) => {
      authorize("baremetal:inspection_rule:update", request.identity);
      const patch = JsonPatch.parse(request.body);
      const rule = await loadRule(deps, request.params.ident);
      const unsetsSensitive = patch.some(
        (op) => op.path === "/sensitive" && op.op !== "remove" && "value" in op && !op.value,
      );
      if (rule.sensitive && unsetsSensitive)
        throw badRequest(
          `Couldn't apply patch '${JSON.stringify(patch)}'. Reason: Inspection rules cannot have the sensitive flag unset.`,
        );
      const editable = {
        description: rule.description,
        priority: rule.priority,
        phase: rule.phase,
        sensitive: rule.sensitive,
        conditions: rule.conditions,
        actions: rule.actions,
      };
      const { doc, touched } = applyJsonPatch(editable, patch, PATCH_RULES);
      const body = checked(doc);
      checkStoredJson(
        body,
        JSON_FIELDS.filter((f) => touched.has(f)),
        deps.config.api,
      );
      const { uuid: _ignored, ...fields } = body;
      return view(request, await deps.store.updateInspectionRule(rule.uuid, fields));
    });
  };
}
