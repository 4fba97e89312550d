import type { FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import { baseUrl } from "./context.ts";
import { badRequest } from "./errors.ts";
import type { PageQuery } from "./query.ts";
import { collection, effectiveLimit, parseQuery } from "./query.ts";
import { renderJson } from "./render.ts";
import type { Page } from "../db/store.ts";

/** self + bookmark links for `path` under `base` (e.g. "chassis/<uuid>/nodes"). */
export function resourceLinks(base: string, path: string): { href: string; rel: string }[] {
  return [
    { href: `${base}/v1/${path}`, rel: "self" },
    { href: `${base}/${path}`, rel: "bookmark" },
  ];
}

/**
 * One stored resource in API form (Ironic's object_to_dict + sanitize_dict): `fields` selects (an unknown one is
 * a 400, as check_for_invalid_fields), else `defaults` for a short list item, else every field. Links always.
 */
export function resourceView(
  record: Record<string, unknown>,
  options: {
    fields?: readonly string[];
    defaults?: readonly string[];
    base: string;
    path: string;
    /** sub-resource link names (a chassis's `nodes`) */
    subs?: readonly string[];
  },
): Record<string, unknown> {
  const all: Record<string, unknown> = { ...record, links: resourceLinks(options.base, options.path) };
  for (const sub of options.subs ?? []) all[sub] = resourceLinks(options.base, `${options.path}/${sub}`);
  if (options.fields) {
    const unknown = options.fields.filter((f) => !(f in all));
    if (unknown.length) throw badRequest(`Field(s) "${unknown.join(", ")}" are not valid`);
  }
  const wanted = options.fields ?? options.defaults;
  if (!wanted) return all;
  const out: Record<string, unknown> = {};
  for (const field of [...wanted, "links"]) if (field in all) out[field] = all[field];
  return out;
}

/** A list's paging, field and sort parameters, checked as Ironic does. */
export function listParams<T extends typeof PageQuery>(
  schema: T,
  request: FastifyRequest,
  options: { detailPath: boolean; sortable: readonly string[] },
): { query: z.infer<T>; page: Page; limit: number; detail: boolean } {
  const query = parseQuery(schema, request.query);
  if (query.fields && (options.detailPath || query.detail === true))
    throw badRequest("Can't fetch a subset of fields with 'detail' set");
  if (query.sort_key !== undefined && !options.sortable.includes(query.sort_key))
    throw badRequest(`The sort_key value ${query.sort_key} is an invalid field for sorting`);
  const limit = effectiveLimit(query.limit);
  const page: Page = { limit, marker: query.marker, sortKey: query.sort_key, sortDir: query.sort_dir };
  return { query, page, limit, detail: options.detailPath || query.detail === true };
}

/** Sends a collection page with Ironic's `next` link. */
export async function sendCollection(
  request: FastifyRequest,
  reply: FastifyReply,
  body: { key: string; items: readonly { uuid: string }[]; views: unknown[]; limit: number; path: string },
): Promise<void> {
  const page = collection({
    ...body,
    url: `${baseUrl(request)}/v1/${body.path}`,
    query: request.query as Record<string, unknown>,
  });
  await reply.type("application/json; charset=utf-8").send(renderJson(page, body.key));
}
