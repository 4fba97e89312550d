import type { AllocationSpec, NodeRecord } from "../../shared/resources.ts";

/** What an allocation asks of a node; the store turns it into one indexed query. */
export interface CandidateRequest {
  resourceClass: string | null;
  traits: readonly string[];
  /** uuids or names; empty means any node */
  candidateNodes: readonly string[];
  spec: AllocationSpec | null;
  /** Ironic: an allocation with an owner only picks nodes that project owns or leases. */
  project?: string | null;
}

/** The node's matching columns, derived from its document on every write. */
export interface MatchColumns {
  memory_mb: number | null;
  cpus: number | null;
  local_gb: number | null;
  cpu_arch: string | null;
  /** Ironic's "k1:v1,k2:v2" normalised to ",k1:v1,k2:v2," so one LIKE finds a pair. */
  capabilities: string;
}

function integerProperty(node: NodeRecord, key: string): number | null {
  const value = Number(node.properties[key]);
  return Number.isFinite(value) ? Math.trunc(value) : null;
}

function capabilityPairs(raw: unknown): [string, string][] {
  if (typeof raw === "string") {
    return raw
      .split(",")
      .map((pair) => {
        const [key, ...rest] = pair.split(":");
        return [key?.trim() ?? "", rest.join(":").trim()] as [string, string];
      })
      .filter(([key]) => key !== "");
  }
  if (raw && typeof raw === "object") return Object.entries(raw).map(([k, v]) => [k, String(v)]);
  return [];
}

export function matchColumns(node: NodeRecord): MatchColumns {
  const pairs = capabilityPairs(node.properties.capabilities);
  return {
    memory_mb: integerProperty(node, "memory_mb"),
    cpus: integerProperty(node, "cpus"),
    local_gb: integerProperty(node, "local_gb"),
    cpu_arch: typeof node.properties.cpu_arch === "string" ? node.properties.cpu_arch : null,
    capabilities: pairs.length ? `,${pairs.map(([k, v]) => `${k}:${v}`).join(",")},` : "",
  };
}

/** Escapes LIKE's wildcards (the statement says ESCAPE '\'). */
function likeLiteral(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** Where the two SQL dialects differ. */
export interface Dialect {
  /** Adds a parameter, returns its placeholder. */
  param(value: string | number): string;
  /** The SQL for "false" on a boolean column. */
  false: string;
  /**
   * node_traits mirrors each node's id, class and claimability, indexed as (trait, node_class, node_id) over
   * claimable rows (PostgreSQL's schema): a claim by traits can walk that index instead of the free nodes.
   */
  traitRows?: boolean;
}

/** How many of a trait's first claimable rows a claim tries before it reads them all. */
export const TRAIT_BATCH = 32;

/** The free-node predicate every claim starts from; a partial index covers exactly these rows. */
export const FREE_NODE =
  "provision_state = 'available' AND reservation IS NULL AND instance_uuid IS NULL AND power_state IS NOT NULL";

/** The partial indexes over free nodes, each in the order one kind of claim sorts by (both stores have them). */
export type FreeNodeIndex = "nodes_free_id" | "nodes_free_fit";

/** node_traits rows to take candidates from, in the order of one of their indexes (see `Dialect.traitRows`). */
export interface TraitWalk {
  where: string;
  order: string;
}

/**
 * A claim picks one node by `WHERE ${where} ORDER BY ${order}` over the nodes table. With `traitWalk` (only
 * where the dialect has `traitRows`), candidates come instead from the node_traits rows it selects, in its
 * order, and `where` still checks each one's node row.
 */
export interface CandidateQuery {
  where: string;
  order: string;
  /** the free-node index to name (SQLite); null: leave it to the planner */
  index: FreeNodeIndex | null;
  traitWalk: TraitWalk | null;
}

/** The spec's conditions on sizes, arch and capabilities; the sizes are also columns of the trait mirror. */
function specConditions(spec: AllocationSpec, sql: Dialect): { sizes: string[]; rest: string[] } {
  const op = spec.match === "exact" ? "=" : ">=";
  const sized: [string, number | undefined][] = [
    ["memory_mb", spec.memory_mb],
    ["cpus", spec.vcpus],
    ["local_gb", spec.local_gb],
  ];
  const sizes = sized.flatMap(([column, wanted]) =>
    wanted === undefined ? [] : [`${column} ${op} ${sql.param(wanted)}`],
  );
  const rest: string[] = [];
  if (spec.cpu_arch !== undefined) rest.push(`cpu_arch = ${sql.param(spec.cpu_arch)}`);
  for (const [key, value] of Object.entries(spec.capabilities ?? {})) {
    rest.push(`capabilities LIKE ${sql.param(`%,${likeLiteral(`${key}:${value}`)},%`)} ESCAPE '\\'`);
  }
  return { sizes, rest };
}

/**
 * WHERE and ORDER BY that choose a free node for the request, from indexed columns only. Without a spec any
 * match will do (lowest id: racing claims skip each other's locked rows); with one, best fit takes the
 * smallest node that satisfies it (memory, then CPUs, then disk, then age), so a 16 GB request leaves the 128 GB machine.
 */
export function candidateQuery(request: CandidateRequest, sql: Dialect): CandidateQuery {
  const where = [FREE_NODE, `maintenance = ${sql.false}`];
  const byClass = request.resourceClass === null ? "" : "resource_class, ";
  const walk: string[] = [];
  if (request.resourceClass !== null) {
    const rc = sql.param(request.resourceClass);
    where.push(`resource_class = ${rc}`);
    walk.push(`node_class = ${rc}`);
  }
  if (request.project) {
    // one placeholder each: SQLite's positional ? takes its value once
    where.push(`(owner = ${sql.param(request.project)} OR lessee = ${sql.param(request.project)})`);
  }
  if (request.candidateNodes.length > 0) {
    const list = request.candidateNodes.map((ident) => sql.param(ident)).join(",");
    where.push(`(uuid IN (${list}) OR name IN (${list}))`);
  }
  const traits = [...new Set(request.traits)];
  // NOTE: by a trait's rows unless the request names its nodes (a few named nodes are found by their unique
  // keys); the first trait leads, the others are probed on each of its nodes
  const lead = sql.traitRows && request.candidateNodes.length === 0 ? traits.shift() : undefined;
  if (lead !== undefined) walk.push("claimable", `trait = ${sql.param(lead)}`);
  for (const trait of traits) {
    where.push(
      `EXISTS (SELECT 1 FROM node_traits t WHERE t.node_uuid = nodes.uuid AND t.trait = ${sql.param(trait)})`,
    );
  }
  const spec = request.spec;
  const conditions = spec === null ? { sizes: [], rest: [] } : specConditions(spec, sql);
  where.push(...conditions.sizes, ...conditions.rest);
  // NOTE: plain columns in the index's order, so the claim reads the first fitting row instead of sorting every
  // match; a node without a size the spec names never matches, so NULL ordering (first in SQLite, last in
  // PostgreSQL) only matters for sizes the request leaves open
  const order = spec === null ? `${byClass}id` : `${byClass}memory_mb, cpus, local_gb, id`;
  if (lead !== undefined) {
    // the mirror's own sizes, with the same conditions, keep the walk in the index's (best-fit) order
    const traitWalk = {
      where: [...walk, ...conditions.sizes].join(" AND "),
      order: spec === null ? "node_class, node_id" : "node_class, memory_mb, cpus, local_gb, node_id",
    };
    return { where: where.join(" AND "), order, index: null, traitWalk };
  }
  // NOTE: with the class fixed, ordering by it too names the partial index's exact column order, so SQLite's
  // planner (no ANALYZE) takes that index instead of walking the whole table in id order (2 s at 10^5 nodes).
  // SQLite's planner (with or without ANALYZE) prefers the unique index on instance_uuid (IS NULL looks like a
  // one-row lookup) or a table scan, and then walks every allocated node or sorts every match: 0.13 s per
  // exact-spec claim and per race loser at 10^5 nodes. The store names the free-node index instead.
  const index = request.resourceClass === null ? null : spec === null ? "nodes_free_id" : "nodes_free_fit";
  return { where: where.join(" AND "), order, index, traitWalk: null };
}
