import type { JsonPatch } from "../../shared/api.ts";
import { badRequest } from "./errors.ts";

function decodeSegment(segment: string): string {
  return segment.replace(/~1/g, "/").replace(/~0/g, "~");
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Applies RFC 6902 add/replace/remove to a copy of `doc`. Only top-level fields in `writable` may be touched;
 * nested paths walk objects (and arrays by index). Pure. @throws ApiError(400)
 */
export function applyJsonPatch(
  doc: Record<string, unknown>,
  patch: JsonPatch,
  writable: ReadonlySet<string>,
): Record<string, unknown> {
  const result = structuredClone(doc);
  for (const operation of patch) {
    const segments = operation.path.slice(1).split("/").map(decodeSegment);
    const field = segments[0] ?? "";
    if (!writable.has(field)) {
      throw badRequest(`'/${field}' is an internal attribute and can not be updated`);
    }
    if (operation.op !== "remove" && !("value" in operation)) {
      throw badRequest(`Patch operation ${operation.op} on ${operation.path} needs a value`);
    }
    let parent: Record<string, unknown> | unknown[] = result;
    for (const segment of segments.slice(0, -1)) {
      const next: unknown = Array.isArray(parent) ? parent[Number(segment)] : parent[segment];
      if (next === undefined || next === null) {
        if (operation.op === "add" && !Array.isArray(parent)) {
          const created: Record<string, unknown> = {};
          parent[segment] = created;
          parent = created;
          continue;
        }
        throw badRequest(
          `Adding a new attribute (${operation.path}) to the root of the resource is not allowed.`,
        );
      }
      if (!isObject(next) && !Array.isArray(next))
        throw badRequest(`Cannot patch ${operation.path}: not an object`);
      parent = next;
    }
    const last = segments[segments.length - 1] ?? "";
    if (Array.isArray(parent)) {
      const index = last === "-" ? parent.length : Number(last);
      if (!Number.isInteger(index) || index < 0 || index > parent.length) {
        throw badRequest(`Invalid array index in ${operation.path}`);
      }
      if (operation.op === "add") parent.splice(index, 0, operation.value);
      else if (index >= parent.length) throw badRequest(`Can't remove non-existent object '${last}'`);
      else if (operation.op === "remove") parent.splice(index, 1);
      else parent[index] = operation.value;
      continue;
    }
    const exists = Object.prototype.hasOwnProperty.call(parent, last);
    if (operation.op === "remove") {
      if (!exists || (segments.length === 1 && parent[last] === undefined)) {
        throw badRequest(`Can't remove non-existent object '${last}'`);
      }
      // removing a top-level field resets it; nested keys disappear
      if (segments.length === 1) parent[last] = null;
      else delete parent[last];
    } else if (operation.op === "replace" && !exists) {
      throw badRequest(`Can't replace non-existent object '${last}'`);
    } else {
      parent[last] = operation.value;
    }
  }
  return result;
}
