import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STATEMENT_CACHE_SIZE, SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { NODE_SORT_KEYS } from "../../conductor/db/store.ts";
import { newNode } from "../../conductor/operations/node-record.ts";
import { fakeHardware } from "../../conductor/drivers/registry.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { PROVISION_STATES } from "../../shared/states.ts";

let store: SqliteStore;
const uuids: string[] = [];

beforeAll(async () => {
  store = new SqliteStore(":memory:");
  const hw = fakeHardware(defaultConfig());
  for (let i = 0; i < 40; i++) {
    const node = await store.createNode(
      newNode({ driver: "fake-hardware", name: `n${i}`, resource_class: `rc${i % 3}` }, hw),
    );
    uuids.push(node.uuid);
  }
});
afterAll(async () => {
  await store.close();
});

describe("the prepared-statement cache", () => {
  it("stays bounded over thousands of distinct list queries, and LIMIT still limits", async () => {
    const filter = fc.record(
      {
        provision_state: fc.constantFrom(...PROVISION_STATES),
        maintenance: fc.boolean(),
        associated: fc.boolean(),
        resource_class: fc.constantFrom("rc0", "rc1", "rc2", "other"),
        driver: fc.string({ maxLength: 6 }),
        conductor_group: fc.string({ maxLength: 4 }),
        owner: fc.string({ maxLength: 4 }),
        lessee: fc.string({ maxLength: 4 }),
        retired: fc.boolean(),
        fault: fc.string({ maxLength: 4 }),
      },
      { requiredKeys: [] },
    );
    const page = fc.record(
      {
        limit: fc.integer({ min: 1, max: 100_000 }),
        marker: fc.constantFrom(...uuids),
        sortKey: fc.constantFrom(...NODE_SORT_KEYS),
        sortDir: fc.constantFrom("asc" as const, "desc" as const),
      },
      { requiredKeys: ["limit"] },
    );
    let queries = 0;
    let largest = 0;
    await fc.assert(
      fc.asyncProperty(filter, page, fc.boolean(), async (f, p, summaries) => {
        const rows = summaries ? await store.listNodeSummaries(f, p) : await store.listNodes(f, p);
        queries++;
        expect(rows.length).toBeLessThanOrEqual(p.limit);
        largest = Math.max(largest, store.statementCacheSize);
        expect(store.statementCacheSize).toBeLessThanOrEqual(STATEMENT_CACHE_SIZE);
      }),
      { numRuns: 5000, seed: 4 },
    );
    expect((await store.listNodes({}, { limit: 7 })).length).toBe(7);
    console.log(
      `statement cache: ${queries} distinct list queries, at most ${largest} statements cached (bound ${STATEMENT_CACHE_SIZE})`,
    );
  });
});
