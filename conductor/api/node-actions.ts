import type { FastifyReply, FastifyRequest } from "fastify";
import {
  BootDeviceBody,
  PowerBody,
  type ProvisionBody,
  ProvisionRequestBody,
  StepsQuery,
  VERB_ALIASES,
} from "../../shared/api.ts";
import { RaidConfigSchema } from "../../shared/raid.ts";
import { requireStrictBool } from "../../shared/strict-bool.ts";
import { NotAcceptable } from "../errors.ts";
import { getBootDevice, injectNmi, setBootDevice, supportedBootDevices } from "../operations/boot-device.ts";
import { changeBootSetting } from "../operations/boot-mode.ts";
import { hardwareOf } from "../operations/operation.ts";
import { changePower } from "../operations/power.ts";
import { setTargetRaidConfig } from "../operations/raid.ts";
import { validateNode } from "../operations/validate.ts";
import { type ApiDeps, baseUrl } from "./context.ts";
import { badRequest, notFound } from "./errors.ts";
import { type IdentParams, nodeFor } from "./node-request.ts";
import { parseQuery } from "./query.ts";
import { RUNBOOKS_VERSION, runbookSteps } from "./runbooks.ts";

type Request = FastifyRequest<IdentParams>;

/** Provision fields newer than the requested microversion are refused (Ironic answers 406). */
function checkProvisionVersion(body: ProvisionRequestBody, minor: number): void {
  // Ironic's MIN_VERB_VERSIONS for the 1.73 aliases: a bare 406, as its check_allow_management_verbs
  if ((body.target === "deploy" || body.target === "undeploy") && minor < 73)
    throw new NotAcceptable("Request not acceptable.");
  // Ironic's check_allow_disable_ramdisk: servicing without the ramdisk arrived in 1.108
  if (
    body.target === "service" &&
    body.disable_ramdisk !== undefined &&
    minor < SERVICE_DISABLE_RAMDISK_MINOR
  )
    throw new NotAcceptable("disable_ramdisk is not acceptable in this API version");
  const needs: [boolean, number, string][] = [
    [body.target === "clean", 15, 'the "clean" target'],
    [body.clean_steps !== undefined, 15, "clean_steps"],
    [body.deploy_steps !== undefined, 69, "deploy_steps"],
    [body.disable_ramdisk !== undefined && body.target !== "service", 70, "disable_ramdisk"],
  ];
  for (const [used, since, what] of needs) {
    if (used && minor < since) throw new NotAcceptable(`${what} requires API version 1.${since} or later.`);
  }
  // Ironic's allow_unhold_verb: a bare NotAcceptable, whatever the node's state
  if (body.target === "unhold" && minor < UNHOLD_MINOR) throw new NotAcceptable("Request not acceptable.");
  // Ironic's allow_runbooks in _handle_runbook: a bare NotAcceptable
  if (body.runbook && minor < RUNBOOKS_VERSION) throw new NotAcceptable("Request not acceptable.");
  // Ironic's allow_service_verb, after its 400 for service_steps with another verb (requestedSteps's check)
  if (body.target === "service" && minor < SERVICE_MINOR) throw new NotAcceptable("Request not acceptable.");
}

/** Ironic's MINOR_108_SERVICE_DISABLE_RAMDISK: `disable_ramdisk` with the service verb. */
export const SERVICE_DISABLE_RAMDISK_MINOR = 108;

/** Ironic's MINOR_87_SERVICE: the service verb and the node's service_step. */
export const SERVICE_MINOR = 87;

/** Ironic's MINOR_85_UNHOLD_VERB. */
export const UNHOLD_MINOR = 85;

function isEmptyObject(value: unknown): boolean {
  return (
    typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).length === 0
  );
}

/** 202 with the node's states as the place to watch. */
async function accepted(request: Request, reply: FastifyReply, uuid: string): Promise<void> {
  await reply
    .code(202)
    .header("Location", `${baseUrl(request)}/v1/nodes/${uuid}/states`)
    .send();
}

/** GET /v1/nodes/{id}/states */
export async function getStates(deps: ApiDeps, request: Request): Promise<Record<string, unknown>> {
  const node = await nodeFor(deps, request, "baremetal:node:get_states");
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
}

/** Ironic's MINOR_110_DEPLOYWAIT_ABORT: abort from `wait call-back`. */
export const DEPLOYWAIT_ABORT_MINOR = 110;

/** Abort from a wait state that gained it later: inspection (1.41), deploy (1.110); a bare 406 below. */
function checkAbortVersion(target: string, state: string, minor: number): void {
  if (target !== "abort") return;
  if (
    (state === "inspect wait" && minor < 41) ||
    (state === "wait call-back" && minor < DEPLOYWAIT_ABORT_MINOR)
  )
    throw new NotAcceptable("Request not acceptable.");
}

/** PUT /v1/nodes/{id}/states/provision */
export async function provision(deps: ApiDeps, request: Request, reply: FastifyReply): Promise<void> {
  const requested = ProvisionRequestBody.parse(request.body);
  checkProvisionVersion(requested, request.apiMinor);
  const { target } = requested;
  const body: ProvisionBody = {
    ...requested,
    target: target === "deploy" || target === "undeploy" ? VERB_ALIASES[target] : target,
  };
  const node = await nodeFor(deps, request, "baremetal:node:set_provision_state");
  checkAbortVersion(body.target, node.provision_state, request.apiMinor);
  const withSteps = await runbookSteps(deps.store, request.identity, {
    node,
    body,
    minor: request.apiMinor,
  });
  await deps.provisioner.provision(node, withSteps);
  await accepted(request, reply, node.uuid);
}

/** PUT /v1/nodes/{id}/states/raid */
export async function setRaid(deps: ApiDeps, request: Request, reply: FastifyReply): Promise<void> {
  if (request.apiMinor < 12) throw new NotAcceptable("Request not acceptable.");
  const node = await nodeFor(deps, request, "baremetal:node:set_raid_state");
  const empty = isEmptyObject(request.body);
  const config = empty ? null : RaidConfigSchema.safeParse(request.body);
  if (config && !config.success) {
    const issue = config.error.issues[0];
    const where = issue?.path.length ? `${issue.path.join(".")}: ` : "";
    throw badRequest(`RAID config validation error: ${where}${issue?.message ?? "invalid"}`);
  }
  await setTargetRaidConfig(deps.provisioner, node, config ? config.data : null);
  await reply.code(204).send();
}

/** GET /v1/nodes/{id}/steps (Anvil's): the clean or deploy steps the node would run (or runs), in order. */
export async function getSteps(deps: ApiDeps, request: Request): Promise<Record<string, unknown>> {
  const { kind } = parseQuery(StepsQuery, request.query);
  const node = await nodeFor(deps, request, "baremetal:node:get");
  hardwareOf(deps.drivers, node.driver);
  const { steps, index } = deps.provisioner.stepsOf(node, kind);
  return { kind, steps, current_index: index };
}

/** PUT /v1/nodes/{id}/states/power */
export async function setPower(deps: ApiDeps, request: Request, reply: FastifyReply): Promise<void> {
  const body = PowerBody.parse(request.body);
  const node = await nodeFor(deps, request, "baremetal:node:set_power_state");
  await changePower(deps.provisioner, node, body.target);
  await accepted(request, reply, node.uuid);
}

/** GET /v1/nodes/{id}/validate */
export async function validate(deps: ApiDeps, request: Request): Promise<Record<string, unknown>> {
  const node = await nodeFor(deps, request, "baremetal:node:validate");
  return validateNode(deps.provisioner, node);
}

/** GET /v1/nodes/{id}/management/boot_device */
export async function bootDevice(deps: ApiDeps, request: Request): Promise<unknown> {
  const node = await nodeFor(deps, request, "baremetal:node:get_boot_device");
  return getBootDevice(deps.provisioner, node);
}

/** GET /v1/nodes/{id}/management/boot_device/supported */
export async function supportedDevices(deps: ApiDeps, request: Request): Promise<unknown> {
  const node = await nodeFor(deps, request, "baremetal:node:get_boot_device");
  return { supported_boot_devices: supportedBootDevices(deps.provisioner, node) };
}

/** PUT /v1/nodes/{id}/management/boot_device */
export async function putBootDevice(deps: ApiDeps, request: Request, reply: FastifyReply): Promise<void> {
  const body = BootDeviceBody.parse(request.body);
  const node = await nodeFor(deps, request, "baremetal:node:set_boot_device");
  await setBootDevice(deps.provisioner, node, {
    device: body.boot_device,
    persistent: body.persistent ?? false,
  });
  await reply.code(204).send();
}

/** PUT /v1/nodes/{id}/management/inject_nmi (1.29; 204 as Ironic's, whose handler reads no body) */
export async function putInjectNmi(deps: ApiDeps, request: Request, reply: FastifyReply): Promise<void> {
  if (request.apiMinor < 29) throw notFound("The resource could not be found.");
  const node = await nodeFor(deps, request, "baremetal:node:inject_nmi");
  await injectNmi(deps.provisioner, node);
  await reply.code(204).send();
}

/** Ironic's MINOR_76_NODE_CHANGE_BOOT_MODE: the boot mode and secure boot setters. */
const BOOT_MODE_MINOR = 76;

/** The `target` of a PUT …/states/boot_mode or …/secure_boot body (Ironic reads it as a keyword argument). */
function targetOf(body: unknown): unknown {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined;
  return (body as Record<string, unknown>).target;
}

function requireBootModeVersion(minor: number): void {
  if (minor < BOOT_MODE_MINOR)
    throw notFound(`This endpoint is supported starting with the API version 1.${BOOT_MODE_MINOR}`);
}

/** Python's str() of a JSON value, as Ironic's messages echo it. */
function pythonText(value: unknown): string {
  if (value === undefined || value === null) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  return typeof value === "string" ? value.slice(0, 64) : JSON.stringify(value).slice(0, 64);
}

/** PUT /v1/nodes/{id}/states/boot_mode (1.76): 202, the change made in the background. */
export async function putBootMode(deps: ApiDeps, request: Request, reply: FastifyReply): Promise<void> {
  const node = await nodeFor(deps, request, "baremetal:node:set_boot_mode");
  requireBootModeVersion(request.apiMinor);
  const target = targetOf(request.body);
  if (target !== "bios" && target !== "uefi")
    throw badRequest(
      `Invalid boot mode ${pythonText(target)} requested for node. Allowed boot modes are: bios, uefi`,
    );
  await changeBootSetting(deps.provisioner, node, { kind: "boot_mode", value: target });
  await accepted(request, reply, node.uuid);
}

/** PUT /v1/nodes/{id}/states/secure_boot (1.76): 202, the change made in the background. */
export async function putSecureBoot(deps: ApiDeps, request: Request, reply: FastifyReply): Promise<void> {
  const node = await nodeFor(deps, request, "baremetal:node:set_secure_boot");
  requireBootModeVersion(request.apiMinor);
  const target = targetOf(request.body);
  // Ironic's args.boolean reads a string strictly; a missing or null target is its "Invalid secure_boot" text
  if (target === undefined || target === null)
    throw badRequest(
      `Invalid secure_boot ${pythonText(target)} requested for node. Allowed secure_boot states are: True, False) `,
    );
  const on = requireStrictBool("target", target);
  await changeBootSetting(deps.provisioner, node, { kind: "secure_boot", value: on });
  await accepted(request, reply, node.uuid);
}
