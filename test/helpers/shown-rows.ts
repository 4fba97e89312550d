import type { NodeFilter, Page, ShownNode, Store } from "../../conductor/db/store.ts";

/**
 * A page's shown rows kept past listNodeShown's `use`, as a test compares them later: each text read as bytes
 * is copied out of the buffer the store reuses.
 */
export function shownRowsOf(
  store: Pick<Store, "listNodeShown">,
  filter: NodeFilter,
  page: Page = {},
): Promise<ShownNode[] | null> {
  return store.listNodeShown(filter, page, (rows) =>
    rows === null
      ? null
      : rows.map((row) => ({
          ...row,
          shown: typeof row.shown === "string" ? row.shown : Buffer.from(row.shown),
        })),
  );
}
