import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import {
  Booleanish,
  BootDeviceBody,
  JsonPatch,
  MaintenanceBody,
  NodeCreateBody,
  PowerBody,
  ProvisionBody,
  ResourceName,
  StepsQuery,
  Trait,
  TraitsBody,
} from "../../shared/api.ts";
import { RaidConfigSchema } from "../../shared/raid.ts";
import { NodeRecord } from "../../shared/resources.ts";
import { NotAcceptable } from "../errors.ts";
import { NODE_SORT_KEYS } from "../db/store.ts";
import { nodeInterfaces, type HardwareType } from "../drivers/hardware-type.ts";
import { TRANSIENT_STATES, WAIT_STATES } from "../states/machine.ts";
import { driverNodeOf } from "../drivers/driver-node.ts";
import type { DriverNode } from "../drivers/interfaces.ts";
import { type ApiDeps, baseUrl, viewContext } from "./context.ts";
import { ApiError, badRequest, conflict, notFound } from "./errors.ts";
import { applyJsonPatch, type PatchRules } from "./json-patch.ts";
import { type ApiLimits, NODE_JSON_FIELDS, checkStoredJson } from "./limits.ts";
import { FieldsQuery, NodeListQuery, collection, effectiveLimit, nextLink, parseQuery } from "./query.ts";
import { renderJson } from "./render.ts";
import {
  NODE_VIEW_FIELDS,
  nodeView,
  portView,
  shortListInSql,
  summaryColumnsFor,
  summaryIsEnough,
} from "./views.ts";
import { isUuid } from "../../shared/uuid.ts";
import { restoreMaskedSecrets } from "../../shared/secrets.ts";
import {
  checkNodePolicies,
  checkNodeRule,
  listScope,
  patchRules,
  redactNodeView,
} from "../auth/node-access.ts";
import { PolicyForbidden, allowed, authorize, type PolicyName } from "../auth/policy.ts";
import { nodeHistory } from "./history.ts";
import { checkNodeChassis } from "./chassis.ts";

/** Fields an operator may change with PATCH; the rest belong to the conductor. */
const WRITABLE = new Set([
  "name",
  "driver",
  "driver_info",
  "properties",
  "instance_info",
  "instance_uuid",
  "extra",
  "resource_class",
  "conductor_group",
  "chassis_uuid",
  "description",
  "owner",
  "lessee",
  "automated_clean",
  "protected",
  "protected_reason",
  "retired",
  "retired_reason",
  "network_data",
  "maintenance",
  "maintenance_reason",
  "shard",
  "boot_mode",
  "bios_interface",
  "boot_interface",
  "console_interface",
  "deploy_interface",
  "inspect_interface",
  "management_interface",
  "network_interface",
  "power_interface",
  "raid_interface",
  "rescue_interface",
  "storage_interface",
  "vendor_interface",
]);

/** Object fields a top-level `remove` resets to {} rather than null; the only ones with patchable sub-keys. */
const OBJECT_FIELDS = ["driver_info", "properties", "instance_info", "extra", "network_data"] as const;

const PATCH_RULES: PatchRules = { writable: WRITABLE, objectFields: new Set(OBJECT_FIELDS) };

const DELETABLE_STATES = new Set(["enroll", "manageable", "available", "adopt failed"]);

type IdentParams = { Params: { ident: string } };

function checkFields(fields: readonly string[] | undefined): void {
  const unknown = (fields ?? []).filter((f) => !NODE_VIEW_FIELDS.has(f));
  if (unknown.length) throw badRequest(`Field(s) "${unknown.join(", ")}" are not valid`);
}

function checkName(name: string | null | undefined): void {
  if (name && isUuid(name)) throw badRequest(`Expected a logical name but received ${name}.`);
}

/** The node a request names (uuid or name). @throws ApiError(404) */
export async function loadNode(deps: ApiDeps, ident: string): Promise<NodeRecord> {
  const node = await deps.store.getNode(ident);
  if (!node) throw notFound(`Node ${ident} could not be found.`);
  return node;
}

function hardware(deps: ApiDeps, driver: string, group = ""): HardwareType {
  const hw = deps.drivers.get(driver);
  if (!hw) {
    throw badRequest(
      `No valid host was found. Reason: No conductor service registered which supports driver ${driver} for conductor group "${group}".`,
    );
  }
  return hw;
}

function notLocked(node: NodeRecord): void {
  if (node.reservation !== null) {
    throw conflict(
      `Node ${node.uuid} is locked by host ${node.reservation}, please retry after the current operation is completed.`,
    );
  }
}

/** The hardware type's interfaces, each replaced by the one requested if it is valid for it. @throws 400 */
function chooseInterfaces(
  hw: HardwareType,
  requested: Partial<Record<keyof HardwareType["interfaces"], string | undefined>>,
): HardwareType["interfaces"] {
  const interfaces = { ...hw.interfaces };
  for (const key of Object.keys(interfaces) as (keyof typeof interfaces)[]) {
    const wanted = requested[key];
    if (wanted === undefined || wanted === interfaces[key]) continue;
    if (!hw.alternatives[key]?.includes(wanted)) {
      const valid = [interfaces[key], ...(hw.alternatives[key] ?? [])].join(", ");
      throw badRequest(
        `Interface ${key} "${wanted}" is not valid for hardware type ${hw.name}; valid: ${valid}`,
      );
    }
    interfaces[key] = wanted;
  }
  return interfaces;
}

export function newNode(body: NodeCreateBody, hw: HardwareType): NodeRecord {
  const interfaces = chooseInterfaces(hw, body);
  return {
    uuid: body.uuid ?? randomUUID(),
    name: body.name ?? null,
    driver: body.driver,
    driver_info: body.driver_info ?? {},
    driver_internal_info: {},
    properties: body.properties ?? {},
    instance_info: body.instance_info ?? {},
    instance_uuid: null,
    allocation_uuid: null,
    extra: body.extra ?? {},
    provision_state: "enroll",
    target_provision_state: null,
    provision_updated_at: null,
    power_state: null,
    target_power_state: null,
    maintenance: false,
    maintenance_reason: null,
    fault: null,
    last_error: null,
    reservation: null,
    conductor_group: body.conductor_group ?? "",
    resource_class: body.resource_class ?? null,
    traits: [],
    description: body.description ?? null,
    owner: body.owner ?? null,
    lessee: body.lessee ?? null,
    automated_clean: body.automated_clean ?? null,
    protected: body.protected ?? false,
    protected_reason: body.protected_reason ?? null,
    retired: body.retired ?? false,
    retired_reason: body.retired_reason ?? null,
    console_enabled: false,
    clean_step: {},
    deploy_step: {},
    raid_config: {},
    target_raid_config: {},
    network_data: body.network_data ?? {},
    boot_mode: body.boot_mode ?? null,
    secure_boot: null,
    chassis_uuid: body.chassis_uuid ?? null,
    shard: body.shard ?? null,
    inspection_started_at: null,
    inspection_finished_at: null,
    ...interfaces,
    created_at: new Date().toISOString(),
    updated_at: null,
  };
}

/** Serialised form of a field for change detection; a value too deep to serialise counts as changed. */
function fingerprint(value: unknown): string | symbol {
  try {
    return JSON.stringify(value);
  } catch {
    return Symbol("unserialisable");
  }
}

/**
 * Applies a JSON Patch to a node and returns the fields that changed. Pure but for validation.
 * @throws ApiError(400), JsonLimitError when a touched field ends up over a limit
 */
function patchNode(node: NodeRecord, patch: JsonPatch, limits: ApiLimits): Partial<NodeRecord> {
  const { doc: patched, touched } = applyJsonPatch(
    node as unknown as Record<string, unknown>,
    patch,
    PATCH_RULES,
  );
  for (const field of OBJECT_FIELDS) if (patched[field] === null) patched[field] = {};
  // a client that read masked secrets and sends them back must not overwrite the real ones (any depth)
  for (const field of ["driver_info", "instance_info"] as const) {
    if (touched.has(field)) restoreMaskedSecrets(patched[field], node[field]);
  }
  for (const key of ["maintenance", "protected", "retired"] as const)
    if (patched[key] === null) patched[key] = false;
  // the stock CLI sends booleans as strings ("False"), as Ironic's type conversion accepts
  for (const key of ["maintenance", "protected", "retired", "automated_clean"] as const) {
    const parsed = Booleanish.safeParse(patched[key]);
    if (typeof patched[key] === "string" && parsed.success) patched[key] = parsed.data;
  }
  const checked = NodeRecord.safeParse(patched);
  if (!checked.success) {
    const issue = checked.error.issues[0];
    throw badRequest(`Invalid value for ${issue?.path.join(".") ?? "a field"}: ${issue?.message ?? ""}`);
  }
  if (checked.data.name !== null) {
    const name = ResourceName.safeParse(checked.data.name);
    if (!name.success) throw badRequest(`Invalid name: ${name.error.issues[0]?.message ?? ""}`);
    checkName(checked.data.name);
  }
  // only what the patch touched is checked: a field stored before the limits existed may stay as it is
  checkStoredJson(
    checked.data,
    NODE_JSON_FIELDS.filter((field) => touched.has(field)),
    limits,
  );
  const changes: Partial<NodeRecord> = {};
  for (const key of touched as Set<keyof NodeRecord>) {
    if (fingerprint(checked.data[key]) !== fingerprint(node[key])) {
      (changes as Record<string, unknown>)[key] = checked.data[key];
    }
  }
  return changes;
}

function validationReport(hw: HardwareType, record: NodeRecord, node: DriverNode): Record<string, unknown> {
  const check = (fn: () => void): { result: boolean; reason?: string } => {
    try {
      fn();
      return { result: true };
    } catch (error) {
      return { result: false, reason: error instanceof Error ? error.message : String(error) };
    }
  };
  const notImplemented = { result: null, reason: "not supported" };
  let raid: Record<string, unknown> = notImplemented;
  try {
    if (nodeInterfaces(hw, record).raid.supported) raid = { result: true };
  } catch (error) {
    raid = { result: false, reason: error instanceof Error ? error.message : String(error) };
  }
  return {
    boot: check(() => hw.boot.validate(node)),
    console: notImplemented,
    deploy: check(() => hw.boot.validate(node)),
    inspect: check(() => hw.power.validate(node)),
    management: check(() => hw.management.validate(node)),
    network: { result: true },
    power: check(() => hw.power.validate(node)),
    raid,
    rescue: notImplemented,
    storage: { result: true },
    bios: notImplemented,
  };
}

function isEmptyObject(value: unknown): boolean {
  return (
    typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).length === 0
  );
}

/** Provision fields newer than the requested microversion are refused (Ironic answers 406). */
function checkProvisionVersion(body: ProvisionBody, minor: number): void {
  const needs: [boolean, number, string][] = [
    [body.target === "clean", 15, 'the "clean" target'],
    [body.clean_steps !== undefined, 15, "clean_steps"],
    [body.deploy_steps !== undefined, 69, "deploy_steps"],
    [body.disable_ramdisk !== undefined, 70, "disable_ramdisk"],
  ];
  for (const [used, since, what] of needs) {
    if (used && minor < since) throw new NotAcceptable(`${what} requires API version 1.${since} or later.`);
  }
}

const NODES_OPEN = Buffer.from('{"nodes":');

/** Nodes: CRUD, states, power, raid, steps, validate, boot device, traits, maintenance, inventory. */
export function nodesPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    /** The node a request names, if the caller passes every rule (Ironic's 403 vs 404). */
    const nodeFor = (request: FastifyRequest<IdentParams>, ...rules: PolicyName[]): Promise<NodeRecord> =>
      checkNodePolicies((ident) => deps.store.getNode(ident), request.identity, {
        ident: request.params.ident,
        rules,
      });

    nodeHistory(app, deps);

    async function list(request: FastifyRequest, reply: FastifyReply, detail: boolean): Promise<void> {
      const query = parseQuery(NodeListQuery, request.query);
      checkFields(query.fields);
      if (detail && query.fields)
        throw badRequest("Can not specify ?detail=True and fields in the same request.");
      if (query.sort_key && !(NODE_SORT_KEYS as readonly string[]).includes(query.sort_key)) {
        throw badRequest(`The sort_key value "${query.sort_key}" is an invalid field for sorting`);
      }
      const limit = effectiveLimit(query.limit);
      const showDetail = detail || query.detail === true;
      const scope = listScope("node", request.identity, query.owner);
      const filter = {
        ...scope,
        provision_state: query.provision_state,
        maintenance: query.maintenance,
        associated: query.associated,
        resource_class: query.resource_class,
        driver: query.driver,
        conductor_group: query.conductor_group,
        instance_uuid: query.instance_uuid,
        fault: query.fault,
        owner: query.owner,
        lessee: query.lessee,
        retired: query.retired,
        chassis_uuid: query.chassis_uuid,
      };
      const page = { limit, marker: query.marker, sortKey: query.sort_key, sortDir: query.sort_dir };
      const ctx = viewContext(request, deps);
      const url = `${baseUrl(request)}/v1/${detail ? "nodes/detail" : "nodes"}`;
      if (!showDetail && query.fields === undefined && shortListInSql(ctx.minor)) {
        // the stock CLI's `node list`: the database writes the page's JSON (no field of it is ever redacted)
        const built = await deps.store.listNodeSummaryJson(filter, page, ctx.baseUrl);
        const next = nextLink({
          count: built.count,
          last: built.lastUuid,
          limit,
          url,
          query: request.query as Record<string, unknown>,
        });
        const tail = next === null ? "}" : `,"next":${JSON.stringify(next)}}`;
        await reply
          .type("application/json; charset=utf-8")
          .send(Buffer.concat([NODES_OPEN, built.json, Buffer.from(tail)]));
        return;
      }
      const nodes =
        !showDetail && summaryIsEnough(query.fields)
          ? await deps.store.listNodeSummaries(filter, page, summaryColumnsFor(query.fields))
          : await deps.store.listNodes(filter, page);
      const body = collection({
        key: "nodes",
        items: nodes,
        views: nodes.map((n) =>
          redactNodeView(nodeView(n, ctx, { fields: query.fields, detail: showDetail }), request.identity, n),
        ),
        limit,
        url,
        query: request.query as Record<string, unknown>,
      });
      await reply.type("application/json; charset=utf-8").send(renderJson(body, "nodes"));
    }

    app.get("/v1/nodes", (request, reply) => list(request, reply, false));
    app.get("/v1/nodes/detail", (request, reply) => list(request, reply, true));

    app.post("/v1/nodes", async (request, reply) => {
      const body = NodeCreateBody.parse(request.body);
      if (!allowed("baremetal:node:create", request.identity)) {
        // a project admin may enroll nodes its project owns (Ironic's self_owned_node)
        authorize("baremetal:node:create:self_owned_node", request.identity);
        const project = request.identity.project;
        if (project === null || (body.owner && body.owner !== project))
          throw new PolicyForbidden("baremetal:node:create");
        body.owner = project;
      }
      checkStoredJson(body, NODE_JSON_FIELDS, deps.config.api);
      checkName(body.name);
      const hw = hardware(deps, body.driver, body.conductor_group);
      await checkNodeChassis(deps, { ...body, previous: null, minor: request.apiMinor });
      const node = await deps.store.createNode(newNode(body, hw));
      deps.events.publish({ type: "created", node: node.uuid });
      await reply
        .code(201)
        .header("Location", `${baseUrl(request)}/v1/nodes/${node.uuid}`)
        .send(nodeView(node, viewContext(request, deps), { detail: true }));
    });

    app.get<IdentParams>("/v1/nodes/:ident", async (request, reply) => {
      const { fields } = parseQuery(FieldsQuery, request.query);
      checkFields(fields);
      const node = await nodeFor(request, "baremetal:node:get");
      const view = redactNodeView(
        nodeView(node, viewContext(request, deps), { fields, detail: true }),
        request.identity,
        node,
      );
      await reply.type("application/json; charset=utf-8").send(renderJson(view));
    });

    app.patch<IdentParams>("/v1/nodes/:ident", async (request, reply) => {
      const patch = JsonPatch.parse(request.body);
      const node = await nodeFor(request, ...patchRules(patch));
      notLocked(node);
      const changes = patchNode(node, patch, deps.config.api);
      await checkNodeChassis(deps, { ...changes, previous: node.chassis_uuid, minor: request.apiMinor });
      if (changes.driver !== undefined) {
        const hw = hardware(deps, changes.driver, node.conductor_group);
        Object.assign(changes, hw.interfaces);
      } else if (Object.keys(changes).some((key) => key.endsWith("_interface"))) {
        // an interface the hardware type does not offer (storage_interface "cinder") is refused, as on create
        chooseInterfaces(hardware(deps, node.driver, node.conductor_group), changes);
      }
      if (
        changes.instance_uuid !== undefined &&
        node.instance_uuid !== null &&
        changes.instance_uuid !== null
      ) {
        throw conflict(`Node ${node.uuid} is associated with instance ${node.instance_uuid}.`);
      }
      const updated = Object.keys(changes).length
        ? await deps.store.updateNode(node.uuid, changes, { ifReservedBy: null })
        : node;
      deps.events.publish({ type: "updated", node: node.uuid, fields: Object.keys(changes) });
      const view = redactNodeView(
        nodeView(updated, viewContext(request, deps), { detail: true }),
        request.identity,
        updated,
      );
      await reply.type("application/json; charset=utf-8").send(renderJson(view));
    });

    app.delete<IdentParams>("/v1/nodes/:ident", async (request, reply) => {
      const node = await nodeFor(request, "baremetal:node:get").then((n) => {
        // Ironic: system admins delete any node, a project admin the nodes its project owns
        if (!allowed("baremetal:node:delete", request.identity))
          checkNodeRule("baremetal:node:delete:self_owned_node", request.identity, n);
        return n;
      });
      if (node.instance_uuid)
        throw conflict(`Node ${node.uuid} is associated with instance ${node.instance_uuid}.`);
      notLocked(node);
      if (node.protected) throw new ApiError(403, `Node ${node.uuid} is protected and cannot be deleted.`);
      const busy =
        TRANSIENT_STATES.includes(node.provision_state) || WAIT_STATES.includes(node.provision_state);
      if (
        !DELETABLE_STATES.has(node.provision_state) &&
        !(node.maintenance && !busy && node.provision_state !== "active")
      ) {
        throw conflict(
          `Can not delete node "${node.uuid}" while it is in provision state "${node.provision_state}". Valid provision states to start deletion are: ${[...DELETABLE_STATES].join(", ")}, or any stable state in maintenance`,
        );
      }
      const hw = deps.drivers.get(node.driver);
      // boot files must not outlive their node
      if (hw) await hw.boot.cleanUpRamdisk(await driverNodeOf(deps.store, node)).catch(() => undefined);
      await deps.store.deleteNode(node.uuid);
      deps.events.publish({ type: "deleted", node: node.uuid });
      await reply.code(204).send();
    });

    app.get<IdentParams>("/v1/nodes/:ident/states", async (request) => {
      const node = await nodeFor(request, "baremetal:node:get_states");
      const states: Record<string, unknown> = {
        console_enabled: node.console_enabled,
        last_error: node.last_error,
        power_state: node.power_state,
        provision_state: node.provision_state,
        provision_updated_at: node.provision_updated_at,
        target_power_state: node.target_power_state,
        target_provision_state: node.target_provision_state,
      };
      if (request.apiMinor >= 12)
        Object.assign(states, { raid_config: node.raid_config, target_raid_config: node.target_raid_config });
      if (request.apiMinor >= 75)
        Object.assign(states, { boot_mode: node.boot_mode, secure_boot: node.secure_boot });
      return states;
    });

    // the one route with a larger body: a config drive travels inside it (Ironic accepts up to 64 MiB)
    const provisionRoute = { bodyLimit: deps.config.api.maxProvisionBodyBytes };
    app.put<IdentParams>("/v1/nodes/:ident/states/provision", provisionRoute, async (request, reply) => {
      const body = ProvisionBody.parse(request.body);
      checkProvisionVersion(body, request.apiMinor);
      const node = await nodeFor(request, "baremetal:node:set_provision_state");
      await deps.provisioner.provision(node, body);
      await reply
        .code(202)
        .header("Location", `${baseUrl(request)}/v1/nodes/${node.uuid}/states`)
        .send();
    });

    app.put<IdentParams>("/v1/nodes/:ident/states/raid", async (request, reply) => {
      if (request.apiMinor < 12) throw new NotAcceptable("Request not acceptable.");
      const node = await nodeFor(request, "baremetal:node:set_raid_state");
      const empty = isEmptyObject(request.body);
      const config = empty ? null : RaidConfigSchema.safeParse(request.body);
      if (config && !config.success) {
        const issue = config.error.issues[0];
        const where = issue?.path.length ? `${issue.path.join(".")}: ` : "";
        throw badRequest(`RAID config validation error: ${where}${issue?.message ?? "invalid"}`);
      }
      await deps.provisioner.setTargetRaidConfig(node, config ? config.data : null);
      await reply.code(204).send();
    });

    // Anvil's extension: the clean or deploy steps the node would run (or runs), in order
    app.get<IdentParams>("/v1/nodes/:ident/steps", async (request) => {
      const { kind } = parseQuery(StepsQuery, request.query);
      const node = await nodeFor(request, "baremetal:node:get");
      hardware(deps, node.driver);
      const { steps, index } = deps.provisioner.stepsOf(node, kind);
      return { kind, steps, current_index: index };
    });

    app.put<IdentParams>("/v1/nodes/:ident/states/power", async (request, reply) => {
      const body = PowerBody.parse(request.body);
      const node = await nodeFor(request, "baremetal:node:set_power_state");
      hardware(deps, node.driver);
      await deps.provisioner.power(node, body.target);
      await reply
        .code(202)
        .header("Location", `${baseUrl(request)}/v1/nodes/${node.uuid}/states`)
        .send();
    });

    app.get<IdentParams>("/v1/nodes/:ident/validate", async (request) => {
      const node = await nodeFor(request, "baremetal:node:validate");
      const hw = hardware(deps, node.driver);
      return validationReport(hw, node, await driverNodeOf(deps.store, node));
    });

    app.get<IdentParams>("/v1/nodes/:ident/management/boot_device", async (request) => {
      const node = await nodeFor(request, "baremetal:node:get_boot_device");
      const hw = hardware(deps, node.driver);
      return hw.management.getBootDevice(await driverNodeOf(deps.store, node));
    });

    app.get<IdentParams>("/v1/nodes/:ident/management/boot_device/supported", async (request) => {
      const node = await nodeFor(request, "baremetal:node:get_boot_device");
      return { supported_boot_devices: hardware(deps, node.driver).management.supportedBootDevices() };
    });

    app.put<IdentParams>("/v1/nodes/:ident/management/boot_device", async (request, reply) => {
      const body = BootDeviceBody.parse(request.body);
      const node = await nodeFor(request, "baremetal:node:set_boot_device");
      notLocked(node);
      const hw = hardware(deps, node.driver);
      if (!hw.management.supportedBootDevices().includes(body.boot_device)) {
        throw badRequest(`Boot device ${body.boot_device} is not supported by node ${node.uuid}`);
      }
      await hw.management.setBootDevice(await driverNodeOf(deps.store, node), {
        device: body.boot_device,
        persistent: body.persistent ?? false,
      });
      await reply.code(204).send();
    });

    app.get<IdentParams>("/v1/nodes/:ident/traits", async (request) => {
      const node = await nodeFor(request, "baremetal:node:traits:list");
      return { traits: node.traits };
    });

    async function setTraits(
      request: FastifyRequest<IdentParams>,
      rule: PolicyName,
      change: (traits: string[]) => string[],
    ): Promise<void> {
      const node = await nodeFor(request, rule);
      notLocked(node);
      await deps.store.updateNode(node.uuid, { traits: change(node.traits) }, { ifReservedBy: null });
    }

    app.put<IdentParams>("/v1/nodes/:ident/traits", async (request, reply) => {
      const body = TraitsBody.parse(request.body);
      await setTraits(request, "baremetal:node:traits:set", () => [...new Set(body.traits)]);
      await reply.code(204).send();
    });

    app.put<{ Params: { ident: string; trait: string } }>(
      "/v1/nodes/:ident/traits/:trait",
      async (request, reply) => {
        const trait = Trait.parse(request.params.trait);
        await setTraits(request, "baremetal:node:traits:set", (traits) =>
          traits.includes(trait) ? traits : [...traits, trait],
        );
        await reply.code(204).send();
      },
    );

    app.delete<IdentParams>("/v1/nodes/:ident/traits", async (request, reply) => {
      await setTraits(request, "baremetal:node:traits:delete", () => []);
      await reply.code(204).send();
    });

    app.delete<{ Params: { ident: string; trait: string } }>(
      "/v1/nodes/:ident/traits/:trait",
      async (request, reply) => {
        const node = await nodeFor(request, "baremetal:node:traits:delete");
        if (!node.traits.includes(request.params.trait)) {
          throw notFound(`Node ${node.uuid} doesn't have a trait ${request.params.trait}`);
        }
        await setTraits(request, "baremetal:node:traits:delete", (traits) =>
          traits.filter((t) => t !== request.params.trait),
        );
        await reply.code(204).send();
      },
    );

    async function setMaintenance(
      request: FastifyRequest<IdentParams>,
      on: boolean,
      reason: string | null,
    ): Promise<void> {
      const node = await nodeFor(
        request,
        on ? "baremetal:node:set_maintenance" : "baremetal:node:clear_maintenance",
      );
      await deps.store.updateNode(node.uuid, {
        maintenance: on,
        maintenance_reason: on ? reason : null,
        fault: on ? node.fault : null,
      });
      deps.events.publish({ type: "maintenance", node: node.uuid, maintenance: on });
    }

    app.put<IdentParams>("/v1/nodes/:ident/maintenance", async (request, reply) => {
      const body = MaintenanceBody.parse(request.body ?? null);
      await setMaintenance(request, true, body?.reason ?? null);
      await reply.code(202).send();
    });

    app.delete<IdentParams>("/v1/nodes/:ident/maintenance", async (request, reply) => {
      await setMaintenance(request, false, null);
      await reply.code(202).send();
    });

    app.get<IdentParams>("/v1/nodes/:ident/inventory", async (request) => {
      const node = await nodeFor(request, "baremetal:node:inventory:get");
      const inventory = await deps.store.getInventory(node.uuid);
      if (inventory === null) throw notFound(`Inventory for node ${node.uuid} could not be found.`);
      return inventory;
    });

    async function nodePorts(request: FastifyRequest<IdentParams>, detail: boolean) {
      const { fields } = parseQuery(z.object({ fields: FieldsQuery.shape.fields }).loose(), request.query);
      const node = await nodeFor(request, "baremetal:port:get");
      const ports = await deps.store.listPorts({ node_uuid: node.uuid }, {});
      const ctx = viewContext(request, deps);
      return { ports: ports.map((p) => portView(p, ctx, { fields, detail })) };
    }

    app.get<IdentParams>("/v1/nodes/:ident/ports", (request) => nodePorts(request, false));
    app.get<IdentParams>("/v1/nodes/:ident/ports/detail", (request) => nodePorts(request, true));
  };
}
