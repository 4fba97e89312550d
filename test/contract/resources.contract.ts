import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { newNode } from "../../conductor/operations/node-record.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import { ChassisNotEmpty, Duplicate, NodeNotFound, NotFound, type Store } from "../../conductor/db/store.ts";
import type { ChassisRecord } from "../../shared/chassis.ts";
import type { DeployTemplateRecord } from "../../shared/deploy-template.ts";
import type { InspectionRuleRecord } from "../../shared/inspection-rule.ts";
import { newPortRecord, type NodeRecord } from "../../shared/resources.ts";
import type { RunbookRecord } from "../../shared/runbook.ts";
import type { VolumeConnectorRecord, VolumeTargetRecord } from "../../shared/volume.ts";
import { useStores, type StoreHarness } from "./harness.ts";

const fake = defaultDrivers(defaultConfig()).get("fake-hardware")!;
const node = (fields: Partial<NodeRecord> = {}): NodeRecord => ({
  ...newNode({ driver: "fake-hardware" }, fake),
  ...fields,
});
const at = (): string => new Date().toISOString();
const chassis = (fields: Partial<ChassisRecord> = {}): ChassisRecord => ({
  uuid: randomUUID(),
  description: null,
  extra: {},
  created_at: at(),
  updated_at: null,
  ...fields,
});
const connector = (nodeUuid: string, fields: Partial<VolumeConnectorRecord> = {}): VolumeConnectorRecord => ({
  uuid: randomUUID(),
  node_uuid: nodeUuid,
  type: "iqn",
  connector_id: `iqn.2026-11.org.anvil:${randomUUID()}`,
  extra: {},
  created_at: at(),
  updated_at: null,
  ...fields,
});
const target = (nodeUuid: string, fields: Partial<VolumeTargetRecord> = {}): VolumeTargetRecord => ({
  uuid: randomUUID(),
  node_uuid: nodeUuid,
  volume_type: "iscsi",
  volume_id: randomUUID(),
  boot_index: 0,
  properties: {},
  extra: {},
  created_at: at(),
  updated_at: null,
  ...fields,
});
const template = (fields: Partial<DeployTemplateRecord> = {}): DeployTemplateRecord => ({
  uuid: randomUUID(),
  name: `CUSTOM_T_${randomUUID().replaceAll("-", "_").toUpperCase()}`,
  steps: [{ interface: "deploy", step: "deploy", args: {}, priority: 10 }],
  extra: {},
  created_at: at(),
  updated_at: null,
  ...fields,
});

const runbook = (fields: Partial<RunbookRecord> = {}): RunbookRecord => ({
  uuid: randomUUID(),
  name: `CUSTOM_RB_${randomUUID().replaceAll("-", "_").toUpperCase()}`,
  description: null,
  traits: [],
  steps: [{ interface: "raid", step: "delete_configuration", args: {}, order: 0 }],
  disable_ramdisk: false,
  extra: {},
  public: false,
  owner: null,
  created_at: at(),
  updated_at: null,
  ...fields,
});

const rule = (fields: Partial<InspectionRuleRecord> = {}): InspectionRuleRecord => ({
  uuid: randomUUID(),
  description: "rule",
  priority: 10,
  sensitive: false,
  phase: "main",
  conditions: [{ op: "eq", args: { values: ["{inventory[cpu][architecture]}", "x86_64"] } }],
  actions: [{ op: "add-trait", args: { name: "CUSTOM_X86" } }],
  created_at: at(),
  updated_at: null,
  ...fields,
});

/** Chassis, volume connectors and targets, deploy templates: the same behaviour on every database. */
export function resourcesContract(name: string, harness: StoreHarness): void {
  describe(`Store resources: ${name}`, () => {
    let store: Store;
    useStores(harness, (opened) => (store = opened), { second: false });

    it("creates, reads, pages, updates and deletes chassis", async () => {
      const made = await Promise.all([1, 2, 3].map(() => store.createChassis(chassis())));
      expect(await store.getChassis(made[1]!.uuid)).toEqual(made[1]);
      const first = await store.listChassis({ limit: 2 });
      expect(first).toHaveLength(2);
      const rest = await store.listChassis({ limit: 1000, marker: first[1]!.uuid });
      const seen = [...first, ...rest].map((c) => c.uuid);
      for (const c of made) expect(seen).toContain(c.uuid);
      expect(new Set(seen).size).toBe(seen.length);
      const updated = await store.updateChassis(made[0]!.uuid, { description: "rack 4", extra: { a: 1 } });
      expect(updated).toMatchObject({ uuid: made[0]!.uuid, description: "rack 4", extra: { a: 1 } });
      expect(updated.updated_at).not.toBeNull();
      await expect(store.createChassis(chassis({ uuid: made[0]!.uuid }))).rejects.toThrow(
        `A chassis with UUID ${made[0]!.uuid} already exists.`,
      );
      await store.deleteChassis(made[2]!.uuid);
      expect(await store.getChassis(made[2]!.uuid)).toBeNull();
      await expect(store.deleteChassis(made[2]!.uuid)).rejects.toBeInstanceOf(NotFound);
      await expect(store.updateChassis(randomUUID(), { description: "x" })).rejects.toBeInstanceOf(NotFound);
    });

    it("lists a node's children by parent, and leaves children out when asked (1.83)", async () => {
      const parent = await store.createNode(node());
      const child = await store.createNode(node({ parent_node: parent.uuid }));
      const other = await store.createNode(node());
      const uuids = async (filter: Parameters<Store["listNodes"]>[0]) =>
        (await store.listNodes(filter, {})).map((n) => n.uuid);
      expect(await uuids({ parent_node: parent.uuid })).toEqual([child.uuid]);
      const roots = await uuids({ exclude_children: true });
      expect(roots).toEqual(expect.arrayContaining([parent.uuid, other.uuid]));
      expect(roots).not.toContain(child.uuid);
      const json = await store.listNodeSummaryJson({ exclude_children: true }, {}, "http://h");
      expect(json.json.toString()).not.toContain(child.uuid);
      expect(json.json.toString()).toContain(parent.uuid);
      await store.updateNode(child.uuid, { parent_node: null });
      expect(await uuids({ parent_node: parent.uuid })).toEqual([]);
      expect(await uuids({ exclude_children: true })).toContain(child.uuid);
    });

    it("lists ports and port groups by their nodes' shard and conductor group, and by description", async () => {
      const tag = randomUUID().slice(0, 8);
      const east = await store.createNode(node({ conductor_group: `east-${tag}`, shard: `s-${tag}` }));
      const west = await store.createNode(node({ conductor_group: `west-${tag}` }));
      const port = (n: NodeRecord, description: string | null) =>
        store.createPort(
          newPortRecord({
            address: `52:54:${randomUUID()
              .slice(0, 8)
              .replace(/(..)(..)(..)(..)/, "$1:$2:$3:$4")}`,
            node_uuid: n.uuid,
            description,
          }),
        );
      const pe = await port(east, `Uplink ${tag} to TOR`);
      const pw = await port(west, null);
      const uuids = async (filter: Parameters<Store["listPorts"]>[0]) =>
        (await store.listPorts(filter, {})).map((p) => p.uuid).sort();
      expect(await uuids({ shard: [`s-${tag}`] })).toEqual([pe.uuid]);
      expect(await uuids({ shard: [] })).toEqual([]);
      expect(await uuids({ conductor_groups: [`east-${tag}`, `west-${tag}`] })).toEqual(
        [pe.uuid, pw.uuid].sort(),
      );
      expect(await uuids({ description_contains: `uplink ${tag} to tor` })).toEqual([pe.uuid]);
      expect(await uuids({ description_contains: `${tag}%` })).toEqual([]);
      const group = await store.createPortgroup({
        uuid: randomUUID(),
        name: null,
        address: null,
        node_uuid: west.uuid,
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
      });
      const groups = async (filter: Parameters<Store["listPortgroups"]>[0]) =>
        (await store.listPortgroups(filter, {})).map((g) => g.uuid);
      expect(await groups({ conductor_groups: [`west-${tag}`] })).toEqual([group.uuid]);
      expect(await groups({ shard: [`s-${tag}`] })).toEqual([]);
      const described = await store.createNode(node({ description: `GPU box ${tag}` }));
      const nodes = await store.listNodes({ description_contains: `gpu BOX ${tag}` }, {});
      expect(nodes.map((n) => n.uuid)).toEqual([described.uuid]);
    });

    it("lists only the nodes whose console is enabled, and follows the document's changes", async () => {
      const on = await store.createNode(node({ console_enabled: true }));
      const off = await store.createNode(node());
      const enabled = async () => (await store.listNodes({ console_enabled: true }, {})).map((n) => n.uuid);
      expect(await enabled()).toContain(on.uuid);
      expect(await enabled()).not.toContain(off.uuid);
      expect((await store.listNodes({ console_enabled: true }, {})).every((n) => n.console_enabled)).toBe(
        true,
      );
      await store.updateNode(on.uuid, { console_enabled: false });
      await store.updateNode(off.uuid, { console_enabled: true });
      expect(await enabled()).toContain(off.uuid);
      expect(await enabled()).not.toContain(on.uuid);
    });

    it("refuses to delete a chassis while a node is in it, and lists nodes by chassis", async () => {
      const c = await store.createChassis(chassis());
      const member = await store.createNode(node({ chassis_uuid: c.uuid }));
      await store.createNode(node());
      expect((await store.listNodes({ chassis_uuid: c.uuid }, {})).map((n) => n.uuid)).toEqual([member.uuid]);
      const refused = store.deleteChassis(c.uuid);
      await expect(refused).rejects.toBeInstanceOf(ChassisNotEmpty);
      await expect(refused).rejects.toThrow(
        `Cannot complete the requested action because chassis ${c.uuid} contains nodes.`,
      );
      await store.updateNode(member.uuid, { chassis_uuid: null });
      expect(await store.listNodes({ chassis_uuid: c.uuid }, {})).toEqual([]);
      await store.deleteChassis(c.uuid);
      expect(await store.getChassis(c.uuid)).toBeNull();
    });

    it("keeps a connector's type and connector_id unique, and a target's boot_index per node", async () => {
      const n = await store.createNode(node());
      const other = await store.createNode(node());
      const c = await store.createVolumeConnector(connector(n.uuid));
      const clash = store.createVolumeConnector(connector(other.uuid, { connector_id: c.connector_id }));
      await expect(clash).rejects.toBeInstanceOf(Duplicate);
      await expect(clash).rejects.toThrow(
        `A volume connector with type iqn and connector ID ${c.connector_id} already exists.`,
      );
      // the same id under another type is another connector
      await store.createVolumeConnector(connector(other.uuid, { type: "ip", connector_id: c.connector_id }));
      const t = await store.createVolumeTarget(target(n.uuid, { boot_index: 0 }));
      await expect(store.createVolumeTarget(target(n.uuid, { boot_index: 0 }))).rejects.toThrow(
        "A volume target with boot index '0' for the same node already exists.",
      );
      await store.createVolumeTarget(target(other.uuid, { boot_index: 0 }));
      const second = await store.createVolumeTarget(target(n.uuid, { boot_index: 1 }));
      await expect(store.updateVolumeTarget(second.uuid, { boot_index: 0 })).rejects.toBeInstanceOf(
        Duplicate,
      );
      await expect(store.createVolumeTarget(target(n.uuid, { uuid: t.uuid, boot_index: 5 }))).rejects.toThrow(
        `A volume target with UUID ${t.uuid} already exists.`,
      );
    });

    it("refuses volume resources of a missing node and deletes them with their node", async () => {
      const missing = randomUUID();
      await expect(store.createVolumeConnector(connector(missing))).rejects.toBeInstanceOf(NodeNotFound);
      await expect(store.createVolumeTarget(target(missing))).rejects.toBeInstanceOf(NodeNotFound);
      const n = await store.createNode(node());
      const c = await store.createVolumeConnector(connector(n.uuid));
      const t = await store.createVolumeTarget(target(n.uuid));
      await expect(store.updateVolumeConnector(c.uuid, { node_uuid: missing })).rejects.toBeInstanceOf(
        NodeNotFound,
      );
      await store.deleteNode(n.uuid);
      expect(await store.getVolumeConnector(c.uuid)).toBeNull();
      expect(await store.getVolumeTarget(t.uuid)).toBeNull();
    });

    it("lists volume resources by node and by project, and updates and deletes them", async () => {
      const mine = await store.createNode(node({ owner: "p-vol" }));
      const leased = await store.createNode(node({ lessee: "p-vol" }));
      const others = await store.createNode(node({ owner: "p-other" }));
      const [a, b, c] = [mine, leased, others].map((n) => connector(n.uuid));
      for (const x of [a!, b!, c!]) await store.createVolumeConnector(x);
      const [ta, tc] = [target(mine.uuid), target(others.uuid)];
      for (const x of [ta, tc]) await store.createVolumeTarget(x);
      const byNode = await store.listVolumeConnectors({ node_uuid: mine.uuid }, {});
      expect(byNode.map((x) => x.uuid)).toEqual([a!.uuid]);
      const byProject = await store.listVolumeConnectors({ project: "p-vol" }, { limit: 1000 });
      expect(byProject.map((x) => x.uuid).sort()).toEqual([a!.uuid, b!.uuid].sort());
      expect((await store.listVolumeTargets({ project: "p-vol" }, {})).map((x) => x.uuid)).toEqual([ta.uuid]);
      const moved = await store.updateVolumeConnector(a!.uuid, { node_uuid: leased.uuid, extra: { k: "v" } });
      expect(moved).toMatchObject({ node_uuid: leased.uuid, extra: { k: "v" }, type: "iqn" });
      expect((await store.listVolumeConnectors({ node_uuid: leased.uuid }, {})).length).toBe(2);
      const t2 = await store.updateVolumeTarget(ta.uuid, { boot_index: 3, properties: { lun: 1 } });
      expect(t2).toMatchObject({ boot_index: 3, properties: { lun: 1 } });
      await store.deleteVolumeTarget(ta.uuid);
      await expect(store.deleteVolumeTarget(ta.uuid)).rejects.toThrow(
        `Volume target ${ta.uuid} could not be found.`,
      );
      await store.deleteVolumeConnector(a!.uuid);
      await expect(store.deleteVolumeConnector(a!.uuid)).rejects.toThrow(
        `Volume connector ${a!.uuid} could not be found.`,
      );
    });

    it("keeps deploy template names unique and finds templates by name", async () => {
      const one = await store.createDeployTemplate(template());
      const two = await store.createDeployTemplate(template());
      expect(await store.getDeployTemplate(one.name)).toEqual(one);
      expect(await store.getDeployTemplate(one.uuid)).toEqual(one);
      await expect(store.createDeployTemplate(template({ name: one.name }))).rejects.toThrow(
        `A deploy template with name ${one.name} already exists.`,
      );
      const found = await store.listDeployTemplatesByNames([
        two.name,
        "CUSTOM_NOT_THERE",
        one.name,
        one.name,
      ]);
      expect(found.map((t) => t.uuid).sort()).toEqual([one.uuid, two.uuid].sort());
      expect(await store.listDeployTemplatesByNames([])).toEqual([]);
      await expect(store.updateDeployTemplate(two.uuid, { name: one.name })).rejects.toBeInstanceOf(
        Duplicate,
      );
      const steps = [
        { interface: "raid" as const, step: "apply_configuration", args: { x: 1 }, priority: 5 },
      ];
      const renamed = await store.updateDeployTemplate(two.uuid, { name: "CUSTOM_RENAMED_T", steps });
      expect(renamed).toMatchObject({ name: "CUSTOM_RENAMED_T", steps });
      expect((await store.getDeployTemplate("CUSTOM_RENAMED_T"))?.uuid).toBe(two.uuid);
      await store.deleteDeployTemplate(two.uuid);
      expect(await store.getDeployTemplate(two.uuid)).toBeNull();
      expect((await store.listDeployTemplates({ limit: 1000 })).map((t) => t.uuid)).toContain(one.uuid);
    });

    it("keeps runbook names unique, finds runbooks by name and lists a project's own and public ones", async () => {
      const project = `P-${randomUUID()}`;
      const own = await store.createRunbook(runbook({ owner: project }));
      const pub = await store.createRunbook(runbook({ public: true }));
      const other = await store.createRunbook(runbook({ owner: `Q-${randomUUID()}` }));
      const system = await store.createRunbook(runbook());
      expect(await store.getRunbook(own.name)).toEqual(own);
      expect(await store.getRunbook(own.uuid)).toEqual(own);
      await expect(store.createRunbook(runbook({ name: own.name }))).rejects.toThrow(
        `A runbook with name ${own.name} already exists.`,
      );
      await expect(store.createRunbook(runbook({ uuid: own.uuid }))).rejects.toBeInstanceOf(Duplicate);
      const seen = (await store.listRunbooks({ project }, { limit: 1000 })).map((r) => r.uuid);
      expect(seen).toEqual(expect.arrayContaining([own.uuid, pub.uuid]));
      expect(seen).not.toContain(other.uuid);
      expect(seen).not.toContain(system.uuid);
      const all = (await store.listRunbooks({}, { limit: 1000 })).map((r) => r.uuid);
      expect(all).toEqual(expect.arrayContaining([own.uuid, pub.uuid, other.uuid, system.uuid]));
      // a runbook made public is listed to every project; the owner column follows an update
      await store.updateRunbook(other.uuid, { public: true, owner: null });
      expect((await store.listRunbooks({ project }, { limit: 1000 })).map((r) => r.uuid)).toContain(
        other.uuid,
      );
      await store.updateRunbook(system.uuid, { owner: project });
      expect((await store.listRunbooks({ project }, { limit: 1000 })).map((r) => r.uuid)).toContain(
        system.uuid,
      );
      await expect(store.updateRunbook(pub.uuid, { name: own.name })).rejects.toBeInstanceOf(Duplicate);
      await expect(store.updateRunbook(randomUUID(), { extra: {} })).rejects.toBeInstanceOf(NotFound);
      await store.deleteRunbook(pub.uuid);
      expect(await store.getRunbook(pub.uuid)).toBeNull();
      await expect(store.deleteRunbook(pub.uuid)).rejects.toThrow(`Runbook ${pub.uuid} could not be found.`);
    });

    it("creates, filters by phase, pages, updates and deletes inspection rules", async () => {
      const made = [];
      for (const priority of [5, 50, 500]) made.push(await store.createInspectionRule(rule({ priority })));
      const other = await store.createInspectionRule(rule({ phase: "other" }));
      expect(await store.getInspectionRule(made[1]!.uuid)).toEqual(made[1]);
      await expect(store.createInspectionRule(rule({ uuid: made[0]!.uuid }))).rejects.toBeInstanceOf(
        Duplicate,
      );
      const main = await store.listInspectionRules({ phase: "main" }, { limit: 1000 });
      expect(main.map((r) => r.uuid)).toEqual(expect.arrayContaining(made.map((r) => r.uuid)));
      expect(main.map((r) => r.uuid)).not.toContain(other.uuid);
      const first = await store.listInspectionRules({}, { limit: 2 });
      const rest = await store.listInspectionRules({}, { limit: 1000, marker: first[1]!.uuid });
      const seen = [...first, ...rest].map((r) => r.uuid);
      expect(new Set(seen).size).toBe(seen.length);
      for (const r of [...made, other]) expect(seen).toContain(r.uuid);
      const actions = [{ op: "set-attribute", args: { path: "resource_class", value: "gold" } }];
      const updated = await store.updateInspectionRule(made[0]!.uuid, {
        priority: 7,
        actions,
        sensitive: true,
      });
      expect(updated).toMatchObject({ priority: 7, actions, sensitive: true });
      expect(updated.updated_at).not.toBeNull();
      await expect(store.updateInspectionRule(randomUUID(), { priority: 1 })).rejects.toBeInstanceOf(
        NotFound,
      );
      await store.deleteInspectionRule(made[0]!.uuid);
      expect(await store.getInspectionRule(made[0]!.uuid)).toBeNull();
      await expect(store.deleteInspectionRule(made[0]!.uuid)).rejects.toBeInstanceOf(NotFound);
    });

    it("stores any extra document and reads it back unchanged (generated)", async () => {
      // key order is not kept (PostgreSQL's JSONB sorts keys): the documents compare as values
      const value = fc.jsonValue({ maxDepth: 3 });
      await fc.assert(
        fc.asyncProperty(fc.dictionary(fc.string({ maxLength: 8 }), value, { maxKeys: 4 }), async (extra) => {
          const made = await store.createChassis(chassis({ extra }));
          const read = await store.getChassis(made.uuid);
          expect(read?.extra).toEqual(JSON.parse(JSON.stringify(extra)));
          await store.deleteChassis(made.uuid);
        }),
        { numRuns: 25 },
      );
    });
  });
}
