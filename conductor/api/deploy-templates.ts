import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { JsonPatch } from "../../shared/api.ts";
import { DeployTemplateCreateBody, DeployTemplateRecord } from "../../shared/deploy-template.ts";
import { restoreMaskedSecrets } from "../../shared/secrets.ts";
import { authorize } from "../auth/policy.ts";
import { ConductorError } from "../errors.ts";
import { type ApiDeps, baseUrl } from "./context.ts";
import { notFound } from "./errors.ts";
import { applyJsonPatch } from "./json-patch.ts";
import { checkStoredJson } from "./limits.ts";
import { FieldsQuery, PageQuery, parseQuery } from "./query.ts";
import { listParams, resourceView, sendCollection } from "./resource-view.ts";
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
    // Ironic: below 1.55 a read is 404 and a write 405, both with this text
    app.addHook("onRequest", async (request) => {
      if (request.apiMinor >= DEPLOY_TEMPLATES_VERSION) return;
      const status = request.method === "GET" ? 404 : 405;
      throw new ConductorError(status, "The API version does not allow deploy templates");
    });

    const view = (request: FastifyRequest, template: DeployTemplateRecord, fields?: readonly string[]) =>
      resourceView(shown(template), {
        fields,
        base: baseUrl(request),
        path: `deploy_templates/${template.uuid}`,
      });

    async function list(request: FastifyRequest, reply: FastifyReply, detailPath: boolean): Promise<void> {
      authorize("baremetal:deploy_template:get", request.identity);
      const { query, page, limit, detail } = listParams(TemplateListQuery, request, {
        detailPath,
        sortable: SORTABLE,
      });
      const items = await deps.store.listDeployTemplates(page);
      const fields = query.fields ?? (detail ? undefined : LIST_FIELDS);
      const views = items.map((t) => view(request, t, fields));
      const path = detailPath ? "deploy_templates/detail" : "deploy_templates";
      await sendCollection(request, reply, { key: "deploy_templates", items, views, limit, path });
    }

    app.get("/v1/deploy_templates", (request, reply) => list(request, reply, false));
    app.get("/v1/deploy_templates/detail", (request, reply) => list(request, reply, true));

    app.get<IdentParams>("/v1/deploy_templates/:ident", async (request) => {
      authorize("baremetal:deploy_template:get", request.identity);
      const { fields } = parseQuery(FieldsQuery, request.query);
      return view(request, await loadTemplate(deps, request.params.ident), fields);
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
      await reply
        .code(201)
        .header("Location", `${baseUrl(request)}/v1/deploy_templates/${template.uuid}`)
        .send(view(request, template));
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

    app.delete<IdentParams>("/v1/deploy_templates/:ident", async (request, reply) => {
      authorize("baremetal:deploy_template:delete", request.identity);
      const template = await loadTemplate(deps, request.params.ident);
      await deps.store.deleteDeployTemplate(template.uuid);
      await reply.code(204).send();
    });
  };
}
