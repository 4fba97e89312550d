import { pythonRepr } from "../../shared/py-format.ts";
import { applyPatch, type Operation } from "rfc6902";
import type { JsonPatch } from "../../shared/api.ts";
import { PROTOTYPE_KEYS } from "../../shared/json-shape.ts";
import { badRequest } from "./errors.ts";

/** Which paths of a resource a PATCH may touch (Ironic's rules: api/controllers/v1/utils.py, node.py). */
export interface PatchRules {
  /** Top-level fields an operator may change; the rest are internal attributes. */
  writable: ReadonlySet<string>;
  /** Top-level fields holding free-form JSON objects: the only ones whose sub-keys a path may name. */
  objectFields: ReadonlySet<string>;
}

export interface PatchOutcome {
  /** A copy of the document with the operations applied (untouched fields are shared, not copied). */
  doc: Record<string, unknown>;
  /** Top-level fields the patch touched. */
  touched: Set<string>;
}

function decodeToken(token: string): string {
  return token.replace(/~1/g, "/").replace(/~0/g, "~");
}

function isContainer(value: unknown): value is Record<string, unknown> | unknown[] {
  return typeof value === "object" && value !== null;
}

/** A short rendering of an operation for error messages (values can be megabytes). */
function describe(operation: JsonPatch[number]): string {
  return `{'op': ${pythonRepr(operation.op)}, 'path': ${pythonRepr(operation.path.slice(0, 200))}}`;
}

/** Decodes a path and refuses the segments that reach a prototype. @throws ApiError(400) */
function segmentsOf(path: string): string[] {
  const segments = path.slice(1).split("/").map(decodeToken);
  const hostile = segments.find((segment) => PROTOTYPE_KEYS.has(segment));
  if (hostile !== undefined) throw badRequest(`'${hostile}' is not allowed in a JSON Patch path (${path}).`);
  return segments;
}

/**
 * The parent a nested operation works on must exist (RFC 6902 §4.1: no implicit creation of parents) and
 * be an object or array. @throws ApiError(400)
 */
function checkParent(root: unknown, tokens: readonly string[], operation: JsonPatch[number]): void {
  let current: unknown = root;
  for (const token of tokens.slice(0, -1)) {
    const owns = Array.isArray(current)
      ? /^(0|[1-9][0-9]*)$/.test(token) && Number(token) < current.length
      : isContainer(current) && Object.prototype.hasOwnProperty.call(current, token);
    if (!owns) {
      // RFC 6902 §4.1: the parent must exist; jsonpatch (Ironic's library) words it this way
      throw badRequest(
        `Couldn't apply patch '${describe(operation)}'. Reason: member '${token.slice(0, 100)}' not found.`,
      );
    }
    current = (current as Record<string, unknown>)[token];
  }
  if (!isContainer(current)) {
    throw badRequest(
      `Couldn't apply patch '${describe(operation)}'. Reason: the parent is not an object or array.`,
    );
  }
}

/** A deep copy of one field, or a 400 when the stored value is beyond copying (stored before limits existed). */
function copyField(value: unknown, field: string): Record<string, unknown> {
  try {
    return structuredClone(value ?? {}) as Record<string, unknown>;
  } catch {
    throw badRequest(`Field ${field} can not be patched below its top level; replace or remove it whole.`);
  }
}

/** A top-level operation: replace or reset a whole field. */
function applyRoot(doc: Record<string, unknown>, field: string, operation: JsonPatch[number]): void {
  if (operation.op === "remove") {
    // NOTE: Ironic patches the resource's full dict, where an unset field is a key holding None, so removing
    // a null field (Nova and openstacksdk remove /instance_uuid after undeploy) succeeds; only a key the
    // resource does not have at all is refused.
    if (!Object.prototype.hasOwnProperty.call(doc, field) || doc[field] === undefined) {
      throw badRequest(`Can't remove non-existent object '${field}'`);
    }
    // removing a top-level field resets it; the caller maps null to the field's default
    doc[field] = null;
    return;
  }
  if (!Object.prototype.hasOwnProperty.call(doc, field)) {
    throw badRequest(`Adding a new attribute (/${field}) to the root of the resource is not allowed.`);
  }
  doc[field] = operation.value;
}

/**
 * Applies RFC 6902 add/replace/remove operations, one at a time and all or nothing, with Ironic's rules:
 * only `writable` top-level fields change, sub-keys only inside `objectFields`, parents are never created
 * implicitly, and `__proto__`, `constructor` and `prototype` are refused as a path segment at any level.
 * The operations themselves are applied by the maintained `rfc6902` library. @throws ApiError(400)
 */
export function applyJsonPatch(
  source: Readonly<Record<string, unknown>>,
  patch: JsonPatch,
  rules: PatchRules,
): PatchOutcome {
  const doc: Record<string, unknown> = { ...source };
  const touched = new Set<string>();
  const copied = new Set<string>();
  for (const operation of patch) {
    const [field = "", ...rest] = segmentsOf(operation.path);
    if (!rules.writable.has(field)) {
      throw badRequest(`'/${field}' is an internal attribute and can not be updated`);
    }
    if (operation.op !== "remove" && !("value" in operation)) {
      throw badRequest(`Patch operation ${operation.op} on ${operation.path} needs a value`);
    }
    touched.add(field);
    if (rest.length === 0) {
      applyRoot(doc, field, operation);
      copied.add(field); // a new value: nothing of the source is shared any more
      continue;
    }
    if (!rules.objectFields.has(field)) {
      throw badRequest(`Couldn't apply patch '${describe(operation)}'. Reason: ${field} is not an object.`);
    }
    if (!copied.has(field)) {
      doc[field] = copyField(doc[field], field);
      copied.add(field);
    }
    const target = doc[field];
    if (!isContainer(target)) {
      throw badRequest(`Couldn't apply patch '${describe(operation)}'. Reason: ${field} is not an object.`);
    }
    checkParent(target, rest, operation);
    const subPath = "/" + operation.path.split("/").slice(2).join("/");
    const [error] = applyPatch(target, [{ ...operation, path: subPath } as Operation]);
    if (error) {
      const last = (rest[rest.length - 1] ?? "").slice(0, 100);
      const reason =
        error.name !== "MissingError"
          ? error.message
          : operation.op === "add"
            ? `member '${last}' not found`
            : `can't ${operation.op} a non-existent object '${last}'`;
      throw badRequest(`Couldn't apply patch '${describe(operation)}'. Reason: ${reason}.`);
    }
  }
  return { doc, touched };
}
