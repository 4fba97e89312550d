import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { JsonPatch, type ProvisionBody, Trait } from "../../shared/api.ts";
import {
  RunbookCreateBody,
  RunbookCreateBody112,
  RunbookRecord,
  runbookRequestSteps,
} from "../../shared/runbook.ts";
import { restoreMaskedSecrets } from "../../shared/secrets.ts";
import type { Identity } from "../auth/identity.ts";
import { listScope } from "../auth/node-access.ts";
import { type PolicyName, PolicyForbidden, allowed, authorize } from "../auth/policy.ts";
import type { Store } from "../db/store.ts";
import { type ApiDeps, baseUrl } from "./context.ts";
import { badRequest, notFound } from "./errors.ts";
import { applyJsonPatch } from "./json-patch.ts";
import { checkStoredJson } from "./limits.ts";
import { documentRoutes, sendCreated } from "./document-routes.ts";
import { PageQuery } from "./query.ts";
import { resourceView } from "./resource-view.ts";
import { STEP_LIST_JSON_FIELDS, maskedSteps, parseStepListBody } from "./step-list.ts";

/** Ironic's MINOR_92_RUNBOOKS. */
export const RUNBOOKS_VERSION = 92;
/** Ironic's MINOR_112_RUNBOOK_TRAITS: runbook traits, description, names beyond traits. */
export const RUNBOOK_TRAITS_VERSION = 112;

const LIST_FIELDS = ["uuid", "name"];
const SORTABLE = ["id", "uuid", "name", "created_at"];
/** A bound on one runbook's traits, as a node's (Ironic's MAX_TRAITS_PER_NODE; it sets none on runbooks). */
const MAX_RUNBOOK_TRAITS = 50;

const PATCHABLE = ["disable_ramdisk", "extra", "name", "owner", "public", "steps"];
/** Ironic's _get_patch_allowed_fields: description from 1.112; traits never (they have their own routes). */
const patchRulesAt = (minor: number) => ({
  writable: new Set(minor >= RUNBOOK_TRAITS_VERSION ? [...PATCHABLE, "description"] : PATCHABLE),
  // NOTE: steps is a list; naming one step's key (/steps/0/order) is allowed, as Ironic does
  objectFields: new Set(["extra", "steps"]),
});

/** PUT /v1/runbooks/{ident}/traits (Ironic's RUNBOOK_TRAITS_SCHEMA). */
const RunbookTraitsBody = z.object({ traits: z.array(Trait).max(MAX_RUNBOOK_TRAITS) }).strict();

const ONE_OR_ALL =
  "A single runbook trait may be added via PUT /v1/runbooks/<runbook identifier>/traits/<trait> with no body, or all runbook traits may be replaced via PUT /v1/runbooks/<runbook identifier>/traits with the list of traits specified in the request body.";

/** The traits routes exist from 1.112 (Ironic's _lookup: a 404 whatever the method). @throws NotFound */
function requireTraitsVersion(request: FastifyRequest): void {
  if (request.apiMinor < RUNBOOK_TRAITS_VERSION)
    throw notFound("The API version does not allow runbook traits");
}

/** Whether a request carries a JSON body (Ironic's `api.request.body and api.request.json_body`). */
const hasBody = (body: unknown): boolean =>
  body !== undefined &&
  body !== null &&
  body !== "" &&
  !(typeof body === "object" && Object.keys(body).length === 0);

const RunbookListQuery = PageQuery.strict();

type IdentParams = { Params: { ident: string } };

/**
 * Ironic's check_runbook_policy_and_retrieve: a missing runbook is 404 for anyone, a runbook the rule does not
 * let the caller at is 403 (runbooks are not hidden as nodes are). @throws NotFound, PolicyForbidden
 */
export async function runbookFor(
  store: Store,
  who: Identity,
  request: { ident: string; rules: readonly PolicyName[] },
): Promise<RunbookRecord> {
  const runbook = await store.getRunbook(request.ident);
  if (!runbook) throw notFound(`Runbook ${request.ident} could not be found.`);
  for (const rule of request.rules) authorize(rule, who, { owner: runbook.owner });
  return withLaterFields(runbook);
}

/**
 * A stored runbook with the 1.112 fields a document written without them lacks (one written by an older
 * conductor after migration 1.112 seeded the others' traits): no description, no traits.
 */
const withLaterFields = (runbook: RunbookRecord): RunbookRecord => ({
  ...runbook,
  description: runbook.description ?? null,
  traits: runbook.traits ?? [],
});

/** Ironic's PATCH policies: /owner and /public have their own rules, any other path the update rule. */
function patchRules(patch: JsonPatch): PolicyName[] {
  const rules = new Set<PolicyName>();
  let generic = false;
  for (const op of patch) {
    if (op.path.startsWith("/owner")) rules.add("baremetal:runbook:update:owner");
    else if (op.path.startsWith("/public")) rules.add("baremetal:runbook:update:public");
    else generic = true;
  }
  if (generic || rules.size === 0) rules.add("baremetal:runbook:update");
  return [...rules];
}

const valuesAt = (patch: JsonPatch, path: string): unknown[] =>
  patch.filter((op) => op.path === path && op.op !== "remove").map((op) => op.value);

/**
 * Ironic's rule for a runbook's owner and public flag: a public runbook has no owner, but an owned one may
 * be made private and given an owner in one patch; making it public clears the owner. @throws Invalid
 */
function ownerAndPublic(runbook: RunbookRecord, patch: JsonPatch): RunbookRecord {
  const owner = valuesAt(patch, "/owner");
  const pub = valuesAt(patch, "/public");
  if (owner.some(Boolean)) {
    const publicValue = pub.length ? pub[0] : false;
    if ((runbook.public && pub.length === 0) || publicValue) {
      throw badRequest(
        `Couldn't apply patch '${JSON.stringify(patch).slice(0, 200)}'. Reason: There cannot be an owner for a public runbook`,
      );
    }
  }
  return pub.length ? { ...runbook, owner: null } : runbook;
}

/** Runbooks (Ironic 1.92): named steps an operator runs as a manual clean or a service. */
export function runbooksPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    const view = (request: FastifyRequest, runbook: RunbookRecord, fields?: readonly string[]) => {
      const { description, traits, ...older } = withLaterFields(runbook);
      // description and traits are shown from 1.112; below, naming them in ?fields= is an unknown field's 400
      const shown = request.apiMinor >= RUNBOOK_TRAITS_VERSION ? { ...older, description, traits } : older;
      return resourceView(
        { ...shown, steps: maskedSteps(runbook.steps) },
        { fields, base: baseUrl(request), path: `runbooks/${runbook.uuid}` },
      );
    };

    documentRoutes(app, {
      since: { minor: RUNBOOKS_VERSION, what: "runbooks" },
      path: "runbooks",
      query: RunbookListQuery,
      sortable: SORTABLE,
      listFields: LIST_FIELDS,
      // a show or delete checks its rule against the runbook found (its owner, whether it is public)
      authorize: (request, action) => (action === "list" ? listScope("runbook", request.identity) : {}),
      list: (scope, _query, page) => deps.store.listRunbooks(scope, page),
      find: async (request, ident, action) => {
        if (action === "delete")
          return runbookFor(deps.store, request.identity, { ident, rules: ["baremetal:runbook:delete"] });
        const stored = await deps.store.getRunbook(ident);
        if (!stored) throw notFound(`Runbook ${ident} could not be found.`);
        const runbook = withLaterFields(stored);
        // Ironic: a runbook the get rule refuses is still shown when it is public
        if (!runbook.public && !allowed("baremetal:runbook:get", request.identity, { owner: runbook.owner }))
          throw new PolicyForbidden("baremetal:runbook:get");
        return runbook;
      },
      remove: (runbook) => deps.store.deleteRunbook(runbook.uuid),
      view,
    });

    app.post("/v1/runbooks", async (request, reply) => {
      authorize("baremetal:runbook:create", request.identity);
      const from112 = request.apiMinor >= RUNBOOK_TRAITS_VERSION;
      const body: RunbookCreateBody112 = parseStepListBody(
        from112 ? RunbookCreateBody112 : RunbookCreateBody,
        request.body,
        "runbook",
      );
      checkStoredJson(body, STEP_LIST_JSON_FIELDS, deps.config.api);
      let owner = body.owner ?? null;
      const project = request.identity.project;
      if (project !== null) {
        if (owner && owner !== project)
          throw badRequest(
            "Cannot create a runbook as a project scoped admin with an owner other than your own project.",
          );
        if (body.public) throw badRequest("Cannot create a public runbook as a project scoped admin.");
        owner = project;
      }
      const runbook = await deps.store.createRunbook({
        uuid: body.uuid ?? randomUUID(),
        name: body.name,
        description: body.description ?? null,
        // Ironic's: a new runbook has no traits, whatever the version (they are set through /traits)
        traits: [],
        steps: body.steps,
        disable_ramdisk: body.disable_ramdisk ?? false,
        extra: body.extra ?? {},
        public: body.public ?? false,
        owner,
        created_at: new Date().toISOString(),
        updated_at: null,
      });
      await sendCreated(request, reply, { path: `runbooks/${runbook.uuid}`, view: view(request, runbook) });
    });

    app.patch<IdentParams>("/v1/runbooks/:ident", async (request) => {
      const patch = JsonPatch.parse(request.body);
      const runbook = await runbookFor(deps.store, request.identity, {
        ident: request.params.ident,
        rules: patchRules(patch),
      });
      // the 1.112 schema at every version, as Ironic's: a name given at 1.112 stays patchable by older clients
      const { doc, touched } = applyJsonPatch(
        ownerAndPublic(runbook, patch),
        patch,
        patchRulesAt(request.apiMinor),
      );
      // a field removed or set to null takes its default, as Ironic's object fields do
      doc.extra ??= {};
      doc.public ??= false;
      doc.disable_ramdisk ??= false;
      // a client that read masked step arguments and sends them back must not overwrite the real ones
      if (touched.has("steps")) restoreMaskedSecrets(doc.steps, runbook.steps);
      const checked = RunbookRecord.parse(doc);
      checkStoredJson(
        checked,
        STEP_LIST_JSON_FIELDS.filter((f) => touched.has(f)),
        deps.config.api,
      );
      const { uuid: _uuid, created_at: _created, updated_at: _updated, ...changes } = checked;
      return view(request, await deps.store.updateRunbook(runbook.uuid, changes));
    });

    const traitsOf = async (request: FastifyRequest<{ Params: { ident: string } }>, rule: PolicyName) => {
      requireTraitsVersion(request);
      return runbookFor(deps.store, request.identity, { ident: request.params.ident, rules: [rule] });
    };
    const setTraits = (runbook: RunbookRecord, traits: string[]) =>
      deps.store.updateRunbook(runbook.uuid, { traits });

    app.get<IdentParams>("/v1/runbooks/:ident/traits", async (request) => {
      const runbook = await traitsOf(request, "baremetal:runbook:get");
      return { traits: runbook.traits };
    });

    app.put<IdentParams>("/v1/runbooks/:ident/traits", async (request, reply) => {
      const runbook = await traitsOf(request, "baremetal:runbook:update");
      const given = request.body as { traits?: unknown } | null | undefined;
      if (given === undefined || given === null || typeof given !== "object" || !("traits" in given))
        throw badRequest(ONE_OR_ALL);
      const { traits } = RunbookTraitsBody.parse(given);
      await setTraits(runbook, [...new Set(traits)]);
      await reply.code(204).send();
    });

    app.put<{ Params: { ident: string; trait: string } }>(
      "/v1/runbooks/:ident/traits/:trait",
      async (request, reply) => {
        const runbook = await traitsOf(request, "baremetal:runbook:update");
        const trait = Trait.parse(request.params.trait);
        const given = request.body as { traits?: unknown } | undefined;
        if (typeof given === "object" && given !== null && "traits" in given) throw badRequest(ONE_OR_ALL);
        if (hasBody(given)) throw badRequest("No body should be provided when adding a trait");
        if (!runbook.traits.includes(trait)) {
          if (runbook.traits.length >= MAX_RUNBOOK_TRAITS)
            throw badRequest(`A runbook may have at most ${MAX_RUNBOOK_TRAITS} traits.`);
          await setTraits(runbook, [...runbook.traits, trait]);
        }
        const ident = encodeURIComponent(request.params.ident);
        await reply
          .code(204)
          .header("Location", `${baseUrl(request)}/v1/runbooks/${ident}/traits/${trait}`)
          .send();
      },
    );

    app.delete<IdentParams>("/v1/runbooks/:ident/traits", async (request, reply) => {
      const runbook = await traitsOf(request, "baremetal:runbook:update");
      await setTraits(runbook, []);
      await reply.code(204).send();
    });

    app.delete<{ Params: { ident: string; trait: string } }>(
      "/v1/runbooks/:ident/traits/:trait",
      async (request, reply) => {
        const runbook = await traitsOf(request, "baremetal:runbook:update");
        // Ironic's: removing a trait the runbook does not have is no error
        if (runbook.traits.includes(request.params.trait))
          await setTraits(
            runbook,
            runbook.traits.filter((t) => t !== request.params.trait),
          );
        await reply.code(204).send();
      },
    );
  };
}

/**
 * Ironic's _handle_runbook: a provision request naming a runbook (uuid or name) gets the runbook's steps as its
 * clean_steps (`clean`) or service_steps (`service`). The caller must pass baremetal:runbook:use for the
 * runbook; from 1.112 the node must carry one of the runbook's traits (none set is its own 400), below 1.112
 * the runbook's name among its traits, as Ironic decides by the request's version. @throws NotFound,
 * PolicyForbidden, Invalid
 */
export async function runbookSteps(
  store: Store,
  who: Identity,
  request: { node: { uuid: string; traits: readonly string[] }; body: ProvisionBody; minor: number },
): Promise<ProvisionBody> {
  const { node, body } = request;
  if (!body.runbook) return body;
  const runbook = await runbookFor(store, who, { ident: body.runbook, rules: ["baremetal:runbook:use"] });
  if (request.minor >= RUNBOOK_TRAITS_VERSION) {
    const traits = [...new Set(runbook.traits)].sort();
    if (traits.length === 0)
      throw badRequest(
        `Runbook ${runbook.uuid} has no traits configured. Please ask an administrator to add traits to the runbook.`,
      );
    if (!traits.some((trait) => node.traits.includes(trait)))
      throw badRequest(
        `This runbook has not been approved for use on this node ${node.uuid}. The node does not have any of the runbook's traits [${traits.map((t) => `'${t}'`).join(", ")}]. Please ask an administrator to add a matching trait to your node.`,
      );
  } else if (!node.traits.includes(runbook.name))
    throw badRequest(
      `This runbook has not been approved for use on this node ${node.uuid}. Please ask an administrator to add it to your node traits.`,
    );
  const steps = runbookRequestSteps(runbook.steps);
  // NOTE: only a runbook that disables the ramdisk passes the flag on: Ironic passes its false too, which its
  // service check (1.108) refuses, so servicing by runbook would never work below 1.108
  const ramdisk = runbook.disable_ramdisk ? { disable_ramdisk: true } : {};
  if (body.target === "clean") {
    if (body.clean_steps?.length)
      throw badRequest('Please provide either "clean_steps" or a runbook, but not both.');
    return { ...body, ...ramdisk, clean_steps: steps };
  }
  if (body.target === "service") {
    if (body.service_steps?.length)
      throw badRequest('Please provide either "service_steps" or a runbook, but not both.');
    return { ...body, ...ramdisk, service_steps: steps };
  }
  throw badRequest(
    `"runbooks" is only valid when setting target provision state to any of ['clean', 'service']`,
  );
}
