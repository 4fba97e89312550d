import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { newNode } from "../../conductor/operations/node-record.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import { INDEXED_INTERNAL_KEYS, NodeLocked, NodeNotFound, type Store } from "../../conductor/db/store.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import { useStores, type StoreHarness } from "./harness.ts";

const fake = defaultDrivers(defaultConfig()).get("fake-hardware")!;
const node = (fields: Partial<NodeRecord> = {}): NodeRecord => ({
  ...newNode({ driver: "fake-hardware" }, fake),
  ...fields,
});

/**
 * Partial updates of driver_internal_info (updateDriverInternalInfo, setDeployProgress): the database merges
 * the keys into the stored document, so what else the document holds is never read and written back.
 */
export function partialUpdateContract(name: string, harness: StoreHarness): void {
  describe(`Store partial updates: ${name}`, () => {
    let store: Store;
    let second: Store | undefined;
    useStores(harness, (opened, other) => {
      store = opened;
      second = other;
    });

    it("merges keys, removes undefined ones, bumps updated_at and leaves the rest of the node", async () => {
      const made = await store.createNode(
        node({ name: `p-${randomUUID()}`, driver_internal_info: { keep: 1, drop: "x", nested: { a: 1 } } }),
      );
      await store.updateNode(made.uuid, { description: "written in between" });
      const updated = await store.updateDriverInternalInfo(made.uuid, {
        added: { deep: [1, "two", null] },
        nested: { b: 2 },
        drop: undefined,
      });
      const expected = { keep: 1, nested: { b: 2 }, added: { deep: [1, "two", null] } };
      expect(updated.driver_internal_info).toEqual(expected);
      expect(updated.description).toBe("written in between");
      expect(updated.updated_at).not.toBeNull();
      expect(Date.parse(updated.updated_at!)).toBeGreaterThanOrEqual(Date.parse(made.created_at));
      const stored = await store.getNode(made.uuid);
      expect(stored).toEqual(updated);
      expect({ ...stored, driver_internal_info: made.driver_internal_info, updated_at: null }).toEqual({
        ...made,
        description: "written in between",
        updated_at: null,
      });
    });

    it("writes only under the reservation asked for; a missing node is NodeNotFound", async () => {
      const made = await store.createNode(node());
      await store.reserveNode(made.uuid, "holder-a");
      await expect(
        store.updateDriverInternalInfo(made.uuid, { k: 1 }, { ifReservedBy: "holder-b" }),
      ).rejects.toThrow(NodeLocked);
      await expect(
        store.setDeployProgress(made.uuid, { bytes_done: 1 }, { ifReservedBy: null }),
      ).rejects.toThrow(NodeLocked);
      expect((await store.getNode(made.uuid))!.driver_internal_info).toEqual(made.driver_internal_info);
      const mine = await store.updateDriverInternalInfo(made.uuid, { k: 1 }, { ifReservedBy: "holder-a" });
      expect(mine.driver_internal_info.k).toBe(1);
      expect(mine.reservation).toBe("holder-a");
      await expect(store.updateDriverInternalInfo(randomUUID(), { k: 1 })).rejects.toThrow(NodeNotFound);
      await expect(store.setDeployProgress(randomUUID(), null)).rejects.toThrow(NodeNotFound);
    });

    it("the progress write sets and clears deploy_progress, nothing else", async () => {
      const made = await store.createNode(node({ driver_internal_info: { other: true } }));
      const progress = { bytes_done: 1024, bytes_total: 4096, rate_bps: 512.5 };
      const during = await store.setDeployProgress(made.uuid, progress);
      expect(during.driver_internal_info).toEqual({ other: true, deploy_progress: progress });
      const after = await store.setDeployProgress(made.uuid, undefined);
      expect(after.driver_internal_info).toEqual({ other: true });
      expect(await store.getNode(made.uuid)).toEqual(after);
    });

    it("an indexed key written by a partial update is what the takeover query sees", async () => {
      const dead = `dead-${randomUUID().slice(0, 8)}`;
      const made = await store.createNode(node({ provision_state: "wait call-back" }));
      const find = async () =>
        (await store.listOrphanedBoots({ waitStates: ["wait call-back"], live: [] }))
          .map((n) => n.uuid)
          .includes(made.uuid);
      expect(await find()).toBe(false);
      await store.updateDriverInternalInfo(made.uuid, { [INDEXED_INTERNAL_KEYS.ramdiskPreparedBy]: dead });
      expect(await find()).toBe(true);
      await store.updateDriverInternalInfo(made.uuid, {
        [INDEXED_INTERNAL_KEYS.ramdiskPreparedBy]: undefined,
      });
      expect(await find()).toBe(false);
    });

    it("concurrent merges of distinct keys from two connections all land", async () => {
      const made = await store.createNode(node());
      const stores = [store, second ?? store];
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          stores[i % 2]!.updateDriverInternalInfo(made.uuid, { [`k${i}`]: i }),
        ),
      );
      const info = (await store.getNode(made.uuid))!.driver_internal_info;
      expect(Object.keys(info).sort()).toEqual(Array.from({ length: 20 }, (_, i) => `k${i}`).sort());
    });

    it("property: any sequence of merges leaves the document a model merge predicts", async () => {
      // keys as code might name them, with the characters a JSON path treats specially; values any JSON
      const key = fc.constantFrom("a", "b.c", "d[0]", "$e", "f g", "ключ", "deploy_progress");
      const value = fc.option(fc.jsonValue({ maxDepth: 2 }), { nil: undefined, freq: 4 });
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.dictionary(key, value), { minLength: 1, maxLength: 4 }),
          async (merges) => {
            runs++;
            const made = await store.createNode(node({ driver_internal_info: { base: "kept" } }));
            let model: Record<string, unknown> = { ...made.driver_internal_info };
            let last: NodeRecord = made;
            for (const merge of merges) {
              last = await store.updateDriverInternalInfo(made.uuid, merge);
              model = JSON.parse(JSON.stringify({ ...model, ...merge })) as Record<string, unknown>;
            }
            expect(last.driver_internal_info).toEqual(model);
            expect((await store.getNode(made.uuid))!.driver_internal_info).toEqual(model);
          },
        ),
        { numRuns: 40 },
      );
      console.log(`partial updates: ${runs} generated merge sequences compared with the model`);
    });
  });
}
