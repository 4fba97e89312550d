import type { CandidateQuery } from "../candidates.ts";

export { TRAIT_BATCH } from "../candidates.ts";

/**
 * The SELECT that picks one node for a claim and locks its row (`FOR UPDATE SKIP LOCKED`: a row another claim
 * holds is skipped, not waited for); it yields the node's `id`, or no row. With a trait walk, `batch` bounds how
 * many of the trait's first claimable rows it reads (null: all of them).
 */
export function claimSelect(query: CandidateQuery, batch: number | null): string {
  if (query.traitWalk === null) {
    return `SELECT id FROM nodes WHERE ${query.where} ORDER BY ${query.order} LIMIT 1 FOR UPDATE SKIP LOCKED`;
  }
  // NOTE: the trait rows come from a subquery with its own ORDER BY (and LIMIT), so the planner reads them from
  // the index in that order, and each one's node is looked up, checked and locked on its own, lazily, until one
  // is taken. As a plain join (`FOR UPDATE OF nodes`) the planner, without statistics on a freshly filled
  // table, scanned the class's free nodes for every trait row (9 ms per claim at 20,000 nodes); with them and
  // without the subquery's LIMIT, it sorted every claimable row of the trait first (1.3 ms, growing).
  return `SELECT pick.id FROM (
      SELECT node_id FROM node_traits WHERE ${query.traitWalk.where} ORDER BY ${query.traitWalk.order}
      ${batch === null ? "" : `LIMIT ${Math.trunc(batch)}`}
    ) lead
    CROSS JOIN LATERAL (
      SELECT id FROM nodes WHERE id = lead.node_id AND ${query.where} FOR UPDATE SKIP LOCKED
    ) pick
    LIMIT 1`;
}
