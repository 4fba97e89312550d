import { z } from "zod";
import { Booleanish } from "../../shared/api.ts";
import { badRequest } from "./errors.ts";

/** Ironic's page size cap. */
export const MAX_LIMIT = 1000;

/**
 * Ironic's args.string_list: a comma-separated list, blanks dropped. Bounded, so a list filter's IN (…) stays
 * far below the databases' parameter limits (SQLite 32,766): every field name of a node fits in 2 KiB.
 */
export const fieldsParam = z
  .string()
  .max(4096)
  .transform((value) =>
    value
      .split(",")
      .map((f) => f.trim())
      .filter(Boolean),
  )
  .optional();

/** Query parameters every collection accepts. */
export const PageQuery = z.object({
  limit: z.coerce.number().int().min(0).optional(),
  marker: z.string().max(255).optional(),
  sort_key: z.string().max(64).optional(),
  sort_dir: z.enum(["asc", "desc"]).optional(),
  fields: fieldsParam,
  detail: Booleanish.optional(),
});

export const NodeListQuery = PageQuery.extend({
  provision_state: z.string().max(64).optional(),
  maintenance: Booleanish.optional(),
  associated: Booleanish.optional(),
  resource_class: z.string().max(80).optional(),
  driver: z.string().max(255).optional(),
  conductor_group: z.string().max(255).optional(),
  instance_uuid: z.string().max(64).optional(),
  fault: z.string().max(255).optional(),
  owner: z.string().max(255).optional(),
  lessee: z.string().max(255).optional(),
  retired: Booleanish.optional(),
  chassis_uuid: z.string().optional(),
  conductor: z.string().optional(),
  description_contains: z.string().max(4096).optional(),
  /** 1.104 */
  instance_name: z.string().max(255).optional(),
  parent_node: z.string().max(255).optional(),
  include_children: Booleanish.optional(),
  /** Ironic's args.string_list: comma-separated shard names */
  shard: fieldsParam,
  sharded: Booleanish.optional(),
}).strict();

export const PortListQuery = PageQuery.extend({
  node: z.string().max(255).optional(),
  node_uuid: z.string().max(64).optional(),
  address: z.string().max(64).optional(),
  portgroup: z.string().optional(),
  /** 1.82 */
  shard: fieldsParam,
  /** 1.97 */
  description_contains: z.string().max(4096).optional(),
  /** 1.99 */
  conductor_groups: fieldsParam,
}).strict();

export const PortgroupListQuery = PageQuery.extend({
  node: z.string().max(255).optional(),
  address: z.string().max(64).optional(),
  /** 1.106 */
  shard: fieldsParam,
  /** 1.99 */
  conductor_groups: fieldsParam,
}).strict();

export const AllocationListQuery = PageQuery.extend({
  node: z.string().max(255).optional(),
  resource_class: z.string().max(80).optional(),
  state: z.string().max(32).optional(),
  owner: z.string().optional(),
}).strict();

/** PATCH /v1/nodes/{id}: reset_interfaces (1.45). */
export const NodePatchQuery = z.object({ reset_interfaces: Booleanish.optional() }).strict();

export const FieldsQuery = z.object({ fields: fieldsParam }).strict();

/** Parses a query with a schema; unknown parameters and bad values are 400s. */
export function parseQuery<T extends z.ZodType>(schema: T, query: unknown): z.infer<T> {
  const parsed = schema.safeParse(query ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    if (issue?.code === "unrecognized_keys")
      throw badRequest(`Unknown query parameter(s): ${issue.keys.join(", ")}`);
    if (issue?.code === "custom" && issue.params?.strictBool === true)
      throw badRequest(`Invalid ${issue.path.join(".")}: ${issue.message}`);
    throw badRequest(
      `Invalid query parameter ${issue?.path.join(".") ?? ""}: ${issue?.message ?? "bad value"}`,
    );
  }
  return parsed.data;
}

export function effectiveLimit(limit: number | undefined): number {
  return limit === undefined || limit === 0 || limit > MAX_LIMIT ? MAX_LIMIT : limit;
}

/**
 * A collection body, `{[key]: views}`, with the `next` link Ironic adds when the page is full.
 */
export function collection(options: {
  key: string;
  items: readonly { uuid: string }[];
  views: unknown[];
  limit: number;
  /** e.g. http://host:6385/v1/nodes/detail */
  url: string;
  query: Record<string, unknown>;
}): Record<string, unknown> {
  const body: Record<string, unknown> = { [options.key]: options.views };
  const next = nextLink({
    ...options,
    count: options.items.length,
    last: options.items.at(-1)?.uuid ?? null,
  });
  if (next !== null) body.next = next;
  return body;
}

/** Ironic's `next` link: present when the page is full, with the same query, the limit and the last uuid. */
export function nextLink(options: {
  count: number;
  last: string | null;
  limit: number;
  url: string;
  query: Record<string, unknown>;
}): string | null {
  if (options.last === null || options.count !== options.limit) return null;
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(options.query)) {
    if (value === undefined || key === "marker" || key === "limit") continue;
    params.set(key, Array.isArray(value) ? value.join(",") : String(value));
  }
  params.set("limit", String(options.limit));
  params.set("marker", options.last);
  return `${options.url}?${params.toString()}`;
}
