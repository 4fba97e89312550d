import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { HashRing } from "../../conductor/cluster/hash-ring.ts";
import { OwnedCounts } from "../../conductor/cluster/owned-counts.ts";
import type { ConductorRecord } from "../../shared/resources.ts";

type Row = { uuid: string; conductor_group: string };

/** A store's paging over rows in id order, counting its reads; a ring over `members`. */
function setup(rows: Row[], members = ["a", "b", "c"]) {
  const reads: { limit?: number; marker?: string }[] = [];
  const store = {
    async listNodeSummaries(_filter: object, page: { limit?: number; marker?: string }) {
      reads.push(page);
      const from = page.marker === undefined ? 0 : rows.findIndex((r) => r.uuid === page.marker) + 1;
      return rows.slice(from, from + (page.limit ?? rows.length));
    },
  };
  const membership = {
    generation: 1,
    ring: new HashRing(members),
    ownerOf(node: Row) {
      const hostname = node.conductor_group === "" ? this.ring.ownerOf(node.uuid) : undefined;
      return hostname === undefined ? undefined : ({ hostname } as ConductorRecord);
    },
  };
  return { store, membership, reads };
}

const fleet = (n: number, group = ""): Row[] =>
  Array.from({ length: n }, () => ({ uuid: randomUUID(), conductor_group: group }));

describe("owned_nodes counts", () => {
  it("count every node once, page by page, as the ring places it", async () => {
    const rows = [...fleet(1_000), ...fleet(20, "rack-9")]; // a group with no conductor: nobody's
    const { store, membership, reads } = setup(rows);
    const counts = await new OwnedCounts({ store, membership, pageSize: 128 }).get();
    const expected = new Map<string, number>();
    for (const row of rows.slice(0, 1_000)) {
      const owner = membership.ring.ownerOf(row.uuid)!;
      expected.set(owner, (expected.get(owner) ?? 0) + 1);
    }
    expect(new Map(counts)).toEqual(expected);
    expect([...counts.values()].reduce((a, b) => a + b, 0)).toBe(1_000);
    expect(reads).toHaveLength(Math.ceil(rows.length / 128));
    expect(reads.slice(1).map((r) => r.marker)).toEqual(
      Array.from({ length: reads.length - 1 }, (_, i) => rows[(i + 1) * 128 - 1]!.uuid),
    );
  });

  it("let other work run between pages instead of counting in one piece", async () => {
    const { store, membership } = setup(fleet(1_000));
    const order: string[] = [];
    setImmediate(() => order.push("other request"));
    await new OwnedCounts({ store, membership, pageSize: 100 }).get();
    order.push("counted");
    expect(order).toEqual(["other request", "counted"]);
  });

  it("share one count between callers, answer a recent one again, and count again when the ring changes or it ages", async () => {
    let now = 0;
    const { store, membership, reads } = setup(fleet(300));
    const owned = new OwnedCounts({ store, membership, pageSize: 1_000, maxAgeMs: 2_000, now: () => now });
    const [first, second] = await Promise.all([owned.get(), owned.get()]);
    expect(second).toBe(first);
    expect(reads).toHaveLength(1);
    now = 1_999;
    expect(await owned.get()).toBe(first);
    expect(reads).toHaveLength(1);
    membership.generation = 2; // a conductor joined or left
    membership.ring = new HashRing(["a", "b"]);
    const after = await owned.get();
    expect(reads).toHaveLength(2);
    expect(after.has("c")).toBe(false);
    now = 5_000;
    await owned.get();
    expect(reads).toHaveLength(3);
  });
});
