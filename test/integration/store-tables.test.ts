import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { defaultConfig } from "../../conductor/config.ts";
import { Duplicate, NodeNotFound, NotFound, type Store } from "../../conductor/db/store.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import { newNode } from "../../conductor/operations/node-record.ts";
import type { DeployTemplateRecord } from "../../shared/deploy-template.ts";
import {
  newPortRecord,
  type AllocationRecord,
  type NodeRecord,
  type PortgroupRecord,
} from "../../shared/resources.ts";
import type { VolumeConnectorRecord, VolumeTargetRecord } from "../../shared/volume.ts";
import { postgresHarness, sqliteHarness, useStores, type StoreHarness } from "../contract/harness.ts";

// Ironic's texts for every resource the SQL core keeps through one Table descriptor (sql/tables.ts): the
// duplicate, missing-node and not-found errors of create and update, on both databases.

const fake = defaultDrivers(defaultConfig()).get("fake-hardware")!;
const at = (): string => new Date().toISOString();
const node = (fields: Partial<NodeRecord> = {}): NodeRecord => ({
  ...newNode({ driver: "fake-hardware" }, fake),
  ...fields,
});
const mac = (): string =>
  `52:54:00:${randomUUID()
    .slice(0, 6)
    .replace(/(..)(..)(..)/, "$1:$2:$3")}`;
const group = (nodeUuid: string, fields: Partial<PortgroupRecord> = {}): PortgroupRecord => ({
  uuid: randomUUID(),
  name: `pg-${randomUUID()}`,
  address: mac(),
  node_uuid: nodeUuid,
  standalone_ports_supported: true,
  internal_info: {},
  extra: {},
  mode: "active-backup",
  properties: {},
  physical_network: null,
  category: null,
  dynamic_portgroup: false,
  created_at: at(),
  updated_at: null,
  ...fields,
});
const allocation = (fields: Partial<AllocationRecord> = {}): AllocationRecord => ({
  uuid: randomUUID(),
  name: `alloc-${randomUUID()}`,
  state: "allocating",
  node_uuid: null,
  resource_class: null,
  traits: [],
  candidate_nodes: [],
  spec: null,
  last_error: null,
  extra: {},
  owner: null,
  created_at: at(),
  updated_at: null,
  ...fields,
});
const connector = (nodeUuid: string): VolumeConnectorRecord => ({
  uuid: randomUUID(),
  node_uuid: nodeUuid,
  type: "iqn",
  connector_id: `iqn.2026-11.org.anvil:${randomUUID()}`,
  extra: {},
  created_at: at(),
  updated_at: null,
});
const target = (nodeUuid: string, bootIndex: number): VolumeTargetRecord => ({
  uuid: randomUUID(),
  node_uuid: nodeUuid,
  volume_type: "iscsi",
  volume_id: randomUUID(),
  boot_index: bootIndex,
  properties: {},
  extra: {},
  created_at: at(),
  updated_at: null,
});
const template = (): DeployTemplateRecord => ({
  uuid: randomUUID(),
  name: `CUSTOM_T_${randomUUID().replaceAll("-", "_").toUpperCase()}`,
  steps: [{ interface: "deploy", step: "deploy", args: {}, priority: 10 }],
  extra: {},
  created_at: at(),
  updated_at: null,
});

/** The promise's rejection: its class and message. */
async function refusal(promise: Promise<unknown>): Promise<{ type: string; message: string }> {
  const error: unknown = await promise.then(
    () => new Error("resolved"),
    (e: unknown) => e,
  );
  return { type: error instanceof Error ? error.constructor.name : typeof error, message: String(error) };
}
const dup = (message: string) => ({ type: Duplicate.name, message: expect.stringContaining(message) });
const gone = (message: string) => ({ type: NotFound.name, message: expect.stringContaining(message) });

function tableSuite(name: string, harness: StoreHarness): void {
  describe(`Store tables: ${name}`, () => {
    let store!: Store;
    useStores(harness, (s) => (store = s));

    it("ports: duplicate uuid and MAC, a missing node, a missing port", async () => {
      const n = await store.createNode(node());
      const a = await store.createPort(newPortRecord({ address: mac(), node_uuid: n.uuid }));
      const b = await store.createPort(newPortRecord({ address: mac(), node_uuid: n.uuid }));
      expect(await refusal(store.createPort({ ...b, address: mac() }))).toEqual(
        dup(`A port with UUID ${b.uuid} already exists.`),
      );
      expect(await refusal(store.createPort({ ...b, uuid: randomUUID() }))).toEqual(
        dup(`A port with MAC address ${b.address} already exists.`),
      );
      expect(await refusal(store.updatePort(b.uuid, { address: a.address }))).toEqual(
        dup(`A port with MAC address ${a.address} already exists.`),
      );
      const orphan = newPortRecord({ address: mac(), node_uuid: randomUUID() });
      expect((await refusal(store.createPort(orphan))).type).toBe(NodeNotFound.name);
      expect((await refusal(store.updatePort(a.uuid, { node_uuid: orphan.node_uuid }))).type).toBe(
        NodeNotFound.name,
      );
      const missing = randomUUID();
      expect(await refusal(store.updatePort(missing, { extra: {} }))).toEqual(
        gone(`Port ${missing} could not be found.`),
      );
      expect(await refusal(store.deletePort(missing))).toEqual(gone(`Port ${missing} could not be found.`));
      expect(await store.getPort(a.uuid)).toEqual(a);
    });

    it("ports of a project's nodes only; the document's portgroup_uuid filters", async () => {
      const mine = await store.createNode(node({ owner: `p-${randomUUID()}` }));
      const theirs = await store.createNode(node({ lessee: `p-${randomUUID()}` }));
      const g = await store.createPortgroup(group(mine.uuid));
      const p1 = await store.createPort(newPortRecord({ address: mac(), node_uuid: mine.uuid }));
      const p2 = await store.createPort(
        newPortRecord({ address: mac(), node_uuid: mine.uuid, portgroup_uuid: g.uuid }),
      );
      await store.createPort(newPortRecord({ address: mac(), node_uuid: theirs.uuid }));
      const uuids = (ports: { uuid: string }[]) => ports.map((p) => p.uuid).sort();
      expect(uuids(await store.listPorts({ project: mine.owner! }, {}))).toEqual([p1.uuid, p2.uuid].sort());
      expect(uuids(await store.listPorts({ portgroup_uuid: g.uuid }, {}))).toEqual([p2.uuid]);
      expect(uuids(await store.listPortgroups({ project: theirs.lessee! }, {}))).toEqual([]);
      expect(uuids(await store.listPortgroups({ project: mine.owner! }, {}))).toEqual([g.uuid]);
    });

    it("port groups: by name, duplicate uuid, name and MAC, a missing one", async () => {
      const n = await store.createNode(node());
      const a = await store.createPortgroup(group(n.uuid));
      const b = await store.createPortgroup(group(n.uuid));
      expect(await store.getPortgroup(a.name!)).toEqual(a);
      expect(await refusal(store.createPortgroup(group(n.uuid, { uuid: a.uuid })))).toEqual(
        dup(`A portgroup with UUID ${a.uuid} already exists.`),
      );
      expect(await refusal(store.createPortgroup(group(n.uuid, { name: a.name })))).toEqual(
        dup(`A portgroup with name ${a.name} already exists.`),
      );
      expect(await refusal(store.updatePortgroup(b.uuid, { address: a.address }))).toEqual(
        dup(`A portgroup with MAC address ${a.address} already exists.`),
      );
      expect((await refusal(store.createPortgroup(group(randomUUID())))).type).toBe(NodeNotFound.name);
      const missing = randomUUID();
      expect(await refusal(store.updatePortgroup(missing, {}))).toEqual(
        gone(`Portgroup ${missing} could not be found.`),
      );
    });

    it("allocations: updated by name or uuid, duplicate names, a missing one", async () => {
      const a = await store.createAllocation(allocation());
      const b = await store.createAllocation(allocation());
      expect(await refusal(store.createAllocation(allocation({ name: a.name })))).toEqual(
        dup(`An allocation with name ${a.name} already exists.`),
      );
      expect(await refusal(store.createAllocation(allocation({ uuid: a.uuid, name: null })))).toEqual(
        dup(`An allocation with UUID ${a.uuid} already exists.`),
      );
      expect(await refusal(store.updateAllocation(b.uuid, { name: a.name }))).toEqual(
        dup(`An allocation with name ${a.name} already exists.`),
      );
      const updated = await store.updateAllocation(a.name!, { state: "error", last_error: "x" });
      expect(updated).toMatchObject({ uuid: a.uuid, state: "error", last_error: "x" });
      expect(await store.listAllocations({ state: "error" }, {})).toContainEqual(updated);
      const missing = randomUUID();
      expect(await refusal(store.updateAllocation(missing, {}))).toEqual(
        gone(`Allocation ${missing} could not be found.`),
      );
      expect(await refusal(store.deleteAllocation(missing))).toEqual(
        gone(`Allocation ${missing} could not be found.`),
      );
    });

    it("volume resources and deploy templates: update conflicts and missing ones", async () => {
      const n = await store.createNode(node());
      const [c1, c2] = [await store.createVolumeConnector(connector(n.uuid)), connector(n.uuid)];
      await store.createVolumeConnector(c2);
      const clash = { type: c1.type, connector_id: c1.connector_id };
      expect(await refusal(store.updateVolumeConnector(c2.uuid, clash))).toEqual(
        dup(`A volume connector with type iqn and connector ID ${c1.connector_id} already exists.`),
      );
      await store.createVolumeTarget(target(n.uuid, 0));
      const t1 = await store.createVolumeTarget(target(n.uuid, 1));
      expect(await refusal(store.updateVolumeTarget(t1.uuid, { boot_index: 0 }))).toEqual(
        dup("A volume target with boot index '0' for the same node already exists."),
      );
      expect((await refusal(store.updateVolumeTarget(t1.uuid, { node_uuid: randomUUID() }))).type).toBe(
        NodeNotFound.name,
      );
      const [d1, d2] = [await store.createDeployTemplate(template()), template()];
      await store.createDeployTemplate(d2);
      expect(await refusal(store.updateDeployTemplate(d2.uuid, { name: d1.name }))).toEqual(
        dup(`A deploy template with name ${d1.name} already exists.`),
      );
      expect(await store.getDeployTemplate(d1.name)).toEqual(d1);
      const missing = randomUUID();
      expect(await refusal(store.updateChassis(missing, {}))).toEqual(
        gone(`Chassis ${missing} could not be found.`),
      );
      expect(await refusal(store.updateDeployTemplate(missing, {}))).toEqual(
        gone(`Deploy template ${missing} could not be found.`),
      );
      expect(await refusal(store.deleteDeployTemplate(missing))).toEqual(
        gone(`Deploy template ${missing} could not be found.`),
      );
    });

    it("property: any sequence of updates leaves the document a model merge predicts", async () => {
      const n = await store.createNode(node());
      const key = fc.constantFrom("extra", "physical_network", "pxe_enabled", "name");
      const value = (k: string) =>
        k === "extra"
          ? fc.dictionary(fc.string({ maxLength: 4 }), fc.oneof(fc.string(), fc.integer(), fc.boolean()), {
              maxKeys: 3,
            })
          : k === "pxe_enabled"
            ? fc.boolean()
            : fc.option(fc.string({ maxLength: 8 }), { nil: null });
      const patch = key.chain((k) => value(k).map((v) => ({ [k]: v })));
      await fc.assert(
        fc.asyncProperty(fc.array(patch, { minLength: 1, maxLength: 5 }), async (patches) => {
          let model = await store.createPort(newPortRecord({ address: mac(), node_uuid: n.uuid }));
          for (const generated of patches) {
            // Names are unique across ports (1.88): each run's port gets its own prefix.
            const p =
              typeof generated.name === "string"
                ? { name: `${model.uuid.slice(0, 8)}-${generated.name}` }
                : generated;
            const written = await store.updatePort(model.uuid, p);
            model = { ...model, ...p, updated_at: written.updated_at };
            expect(written).toEqual(model);
          }
          expect(await store.getPort(model.uuid)).toEqual(model);
        }),
        { numRuns: 15 },
      );
    });
  });
}

tableSuite("SQLite", sqliteHarness("tables"));
tableSuite("PostgreSQL", postgresHarness("tables"));
