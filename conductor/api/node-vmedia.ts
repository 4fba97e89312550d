import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { VMEDIA_DEVICES, type VmediaDevice } from "../drivers/out-of-band.ts";
import {
  ATTACH_VMEDIA,
  DETACH_VMEDIA,
  GET_VMEDIA,
  attachVirtualMedia,
  detachVirtualMedia,
  getVirtualMedia,
  type AttachRequest,
  type VmediaSource,
} from "../operations/virtual-media.ts";
import type { ApiDeps } from "./context.ts";
import { badRequest, notFound } from "./errors.ts";
import { type IdentParams, calls, nodeFor } from "./node-request.ts";

/** Ironic's MINOR_89_ATTACH_DETACH_VMEDIA and MINOR_93_GET_VMEDIA. */
export const VMEDIA_MINOR = 89;
export const GET_VMEDIA_MINOR = 93;

const SOURCES: readonly VmediaSource[] = ["http", "local", "swift"];
const FIELDS = ["device_type", "image_url", "image_download_source"];
/** Ironic's image_publisher.VMEDIA_SUPPORTED_URL_SCHEMES. */
const URL_SCHEMES = new Set(["http", "https", "nfs", "cifs", "smb"]);

/** A JSON value as Python's repr prints it in jsonschema's messages (bounded). */
function pyValue(value: unknown): string {
  return pyRepr(value).slice(0, 300);
}

function pyRepr(value: unknown): string {
  if (typeof value === "string") {
    const text = value.slice(0, 300);
    return text.includes("'") && !text.includes('"') ? `"${text}"` : `'${text.replace(/'/g, "\\'")}'`;
  }
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "number") return String(value);
  if (Array.isArray(value)) return `[${value.slice(0, 50).map(pyRepr).join(", ")}]`;
  const entries = Object.entries(value as Record<string, unknown>).slice(0, 50);
  return `{${entries.map(([key, item]) => `${pyRepr(key)}: ${pyRepr(item)}`).join(", ")}}`;
}

const schemaError = (message: string) => badRequest(`Schema error for vmedia: ${message}`);

function requireString(body: Record<string, unknown>, field: string): void {
  if (field in body && typeof body[field] !== "string")
    throw schemaError(`${pyValue(body[field])} is not of type 'string'`);
}

function requireOneOf(body: Record<string, unknown>, field: string, allowed: readonly string[]): void {
  const value = body[field];
  if (typeof value === "string" && !allowed.includes(value))
    throw schemaError(`${pyValue(value)} is not one of [${allowed.map((a) => `'${a}'`).join(", ")}]`);
}

/**
 * Ironic's VMEDIA_ATTACH_VALIDATOR (jsonschema, its messages in the order its best match picks: the body's
 * own errors first, then each field's), then its URL scheme check. @throws Invalid (400)
 */
export function parseVmediaBody(body: unknown): AttachRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw schemaError(`${pyValue(body)} is not of type 'object'`);
  const fields = body as Record<string, unknown>;
  for (const field of ["device_type", "image_url"])
    if (!(field in fields)) throw schemaError(`'${field}' is a required property`);
  const extra = Object.keys(fields).filter((key) => !FIELDS.includes(key));
  if (extra.length > 0)
    throw schemaError(
      `Additional properties are not allowed (${extra.map(pyValue).join(", ")} ${extra.length === 1 ? "was" : "were"} unexpected)`,
    );
  for (const field of FIELDS) requireString(fields, field);
  requireOneOf(fields, "device_type", VMEDIA_DEVICES);
  requireOneOf(fields, "image_download_source", SOURCES);
  const url = fields.image_url as string;
  // Python's urlparse: the scheme is what precedes the first ":" when it is a letter then scheme characters
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(url)?.[1]?.toLowerCase() ?? "";
  if (!URL_SCHEMES.has(scheme)) throw badRequest(`Unsupported or missing URL scheme: ${scheme}`);
  if (!URL.canParse(url)) throw badRequest(`Invalid image_url: ${pyValue(url)} is not a valid URL`);
  return {
    device: fields.device_type as VmediaDevice,
    url,
    source: (fields.image_download_source as VmediaSource | undefined) ?? "local",
  };
}

/**
 * Ironic's args.string_list over `device_types` (repeated, comma separated, lower-cased, unique), each a
 * VMEDIA_DEVICES member. Null when none is named (every device). @throws Invalid (Ironic's text)
 */
export function parseDeviceTypes(raw: unknown): VmediaDevice[] | null {
  if (raw === undefined || raw === null) return null;
  const values = Array.isArray(raw) ? raw : [raw];
  const items: string[] = [];
  for (const value of values) {
    if (typeof value !== "string") throw badRequest(`Expected string for device_types: ${pyValue(value)}`);
    // NOTE: Ironic splits a single value on commas and takes repeated ones as they are; both are split here
    for (const part of value.split(",")) {
      const item = part.trim().toLowerCase();
      if (item !== "" && !items.includes(item)) items.push(item);
    }
  }
  if (items.length === 0) return null;
  const invalid = items.filter((item) => !(VMEDIA_DEVICES as readonly string[]).includes(item));
  if (invalid.length > 0)
    throw badRequest(`Invalid device type(s) ${invalid.join(", ")} (valid are ${VMEDIA_DEVICES.join(", ")})`);
  return items as VmediaDevice[];
}

function requireVersion(request: FastifyRequest, minor: number): void {
  if (request.apiMinor < minor) throw notFound("The resource could not be found.");
}

type DeviceParams = { Params: { ident: string; device: string } };

/** Ironic's NodeVmediaController: POST and DELETE …/vmedia (1.89), GET …/vmedia (1.93). */
export function nodeVmediaRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const path = "/v1/nodes/:ident/vmedia";
  app.get<IdentParams>(path, calls(GET_VMEDIA), async (request) => {
    requireVersion(request, GET_VMEDIA_MINOR);
    const node = await nodeFor(deps, request, "baremetal:node:vmedia:get");
    return getVirtualMedia(deps.provisioner, node);
  });
  app.post<IdentParams>(path, calls(ATTACH_VMEDIA), async (request, reply: FastifyReply) => {
    requireVersion(request, VMEDIA_MINOR);
    const attach = parseVmediaBody(request.body);
    const node = await nodeFor(deps, request, "baremetal:node:vmedia:attach");
    await attachVirtualMedia(deps.provisioner, node, attach);
    await reply.code(204).send();
  });
  const detach = async (
    request: FastifyRequest<IdentParams>,
    reply: FastifyReply,
    devices: unknown,
  ): Promise<void> => {
    requireVersion(request, VMEDIA_MINOR);
    const named = parseDeviceTypes(devices);
    const node = await nodeFor(deps, request, "baremetal:node:vmedia:detach");
    await detachVirtualMedia(deps.provisioner, node, named);
    await reply.code(204).send();
  };
  app.delete<IdentParams>(path, calls(DETACH_VMEDIA), (request, reply) =>
    detach(request, reply, (request.query as { device_types?: unknown }).device_types),
  );
  // Ironic's controller also takes the devices as the path's remainder: DELETE …/vmedia/cdrom
  app.delete<DeviceParams>(`${path}/:device`, calls(DETACH_VMEDIA), (request, reply) =>
    detach(request, reply, request.params.device),
  );
}
