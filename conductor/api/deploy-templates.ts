import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { JsonPatch } from "../../shared/api.ts";
import { DeployTemplateCreateBody, DeployTemplateRecord } from "../../shared/deploy-template.ts";
import { restoreMaskedSecrets } from "../../shared/secrets.ts";
import { authorize } from "../auth/policy.ts";
import { type ApiDeps, baseUrl } from "./context.ts";
import { notFound } from "./errors.ts";
import { applyJsonPatch } from "./json-patch.ts";
import { checkStoredJson } from "./limits.ts";
import { documentRoutes, sendCreated, systemRules } from "./document-routes.ts";
import { PageQuery } from "./query.ts";
import { resourceView } from "./resource-view.ts";
import { STEP_LIST_JSON_FIELDS, maskedSteps, parseStepListBody } from "./step-list.ts";

/** Deploy templates came with microversion 1.55. */
export const DEPLOY_TEMPLATES_VERSION = 55;

const LIST_FIELDS = ["uuid", "name"];
const SORTABLE = ["id", "uuid", "name", "created_at"];
const PATCH_RULES = {
  writable: new Set(["extra", "name", "steps"]),
  // NOTE: steps is a list; naming one step's key (/steps/0/priority) is allowed, as Ironic does
  objectFields: new Set(["extra", "steps"]),
};

const TemplateListQuery = PageQuery.strict();

type IdentParams = { Params: { ident: string } };

function shown(template: DeployTemplateRecord): DeployTemplateRecord {
  return { ...template, steps: maskedSteps(template.steps) };
}

async function loadTemplate(deps: ApiDeps, ident: string): Promise<DeployTemplateRecord> {
  const template = await deps.store.getDeployTemplate(ident);
  if (!template) throw notFound(`Deploy template ${ident} could not be found.`);
  return template;
}

/** Deploy templates (Ironic 1.55): named by a trait, their steps join the deploy of a node asking for it. */
export function deployTemplatesPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    const view = (request: FastifyRequest, template: DeployTemplateRecord, fields?: readonly string[]) =>
      resourceView(shown(template), {
        fields,
        base: baseUrl(request),
        path: `deploy_templates/${template.uuid}`,
      });

    documentRoutes(app, {
      since: { minor: DEPLOY_TEMPLATES_VERSION, what: "deploy templates" },
      path: "deploy_templates",
      query: TemplateListQuery,
      sortable: SORTABLE,
      listFields: LIST_FIELDS,
      authorize: systemRules("deploy_template"),
      list: (_scope, _query, page) => deps.store.listDeployTemplates(page),
      find: (_request, ident) => loadTemplate(deps, ident),
      remove: (template) => deps.store.deleteDeployTemplate(template.uuid),
      view,
    });

    app.post("/v1/deploy_templates", async (request, reply) => {
      authorize("baremetal:deploy_template:create", request.identity);
      const body = parseStepListBody(DeployTemplateCreateBody, request.body, "template");
      checkStoredJson(body, STEP_LIST_JSON_FIELDS, deps.config.api);
      const template = await deps.store.createDeployTemplate({
        uuid: body.uuid ?? randomUUID(),
        name: body.name,
        steps: body.steps,
        extra: body.extra ?? {},
        created_at: new Date().toISOString(),
        updated_at: null,
      });
      await sendCreated(request, reply, {
        path: `deploy_templates/${template.uuid}`,
        view: view(request, template),
      });
    });

    app.patch<IdentParams>("/v1/deploy_templates/:ident", async (request) => {
      authorize("baremetal:deploy_template:update", request.identity);
      const patch = JsonPatch.parse(request.body);
      const template = await loadTemplate(deps, request.params.ident);
      const { doc, touched } = applyJsonPatch(template, patch, PATCH_RULES);
      if (doc.extra === null) doc.extra = {};
      // a client that read masked step arguments and sends them back must not overwrite the real ones
      if (touched.has("steps")) restoreMaskedSecrets(doc.steps, template.steps);
      const checked = DeployTemplateRecord.parse(doc);
      checkStoredJson(
        checked,
        STEP_LIST_JSON_FIELDS.filter((f) => touched.has(f)),
        deps.config.api,
      );
      const updated = await deps.store.updateDeployTemplate(template.uuid, {
        name: checked.name,
        steps: checked.steps,
        extra: checked.extra,
      });
      return view(request, updated);
    });
  };
}
