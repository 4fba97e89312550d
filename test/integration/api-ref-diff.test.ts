import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_VERSION_STRING } from "../../conductor/api/microversion.ts";
import { api, powerOff, startConductor, waitForState } from "../helpers/conductor.ts";
import { until } from "../helpers/wait.ts";

/**
 * Raw requests to the endpoints added since Nova's (vmedia, runbooks, inspection rules, shards, the node's
 * allocation, chassis, volume connectors and targets, deploy templates, boot mode and secure boot, a port
 * created by node name), compared with Ironic's api-ref: the status its `.inc` documents, the microversion
 * headers, and the key sets of its `samples/*.json` (kept here as facts, one list per sample).
 */
let ctx: Awaited<ReturnType<typeof startConductor>>;
let node = "";
const at = (version: string) => ({ "X-OpenStack-Ironic-API-Version": version });
const latest = at(MAX_VERSION_STRING);
const keys = (body: unknown): string[] => Object.keys(body as object).sort();
const firstOf = (body: unknown, collection: string): unknown =>
  ((body as Record<string, unknown[] | undefined>)[collection] ?? [])[0];

/** Ironic's api-ref samples, as key sets (sorted). */
const SAMPLES = {
  "chassis-show-response": ["created_at", "description", "extra", "links", "nodes", "updated_at", "uuid"],
  "chassis-list-response": ["description", "links", "uuid"],
  "deploy-template-create-response": ["created_at", "extra", "links", "name", "steps", "updated_at", "uuid"],
  "deploy-template-list-response": ["links", "name", "uuid"],
  // the sample predates disable_ramdisk, which Ironic's runbook.py always sets (setdefault False)
  "runbook-create-response": [
    ...["created_at", "disable_ramdisk", "extra", "links", "name", "owner", "public", "steps"],
    ...["updated_at", "uuid"],
  ],
  "runbook-list-response": ["links", "name", "uuid"],
  "inspection-rule-create-response": [
    ...["actions", "conditions", "created_at", "description", "links", "phase", "priority", "sensitive"],
    ...["updated_at", "uuid"],
  ],
  // the sample shows `sensitive`; Ironic's inspection_rule.py DEFAULT_RETURN_FIELDS (what it answers) do not
  "inspection-rule-list-response": ["description", "links", "phase", "priority", "uuid"],
  "shards-list-response": ["count", "name"],
  "volume-connector-create-response": [
    ...["connector_id", "created_at", "extra", "links", "node_uuid", "type", "updated_at", "uuid"],
  ],
  "volume-connector-list-response": ["connector_id", "links", "node_uuid", "type", "uuid"],
  "volume-target-create-response": [
    ...["boot_index", "created_at", "extra", "links", "node_uuid", "properties", "updated_at", "uuid"],
    ...["volume_id", "volume_type"],
  ],
  "volume-target-list-response": ["boot_index", "links", "node_uuid", "uuid", "volume_id", "volume_type"],
  "volume-list-response": ["connectors", "links", "targets"],
  "allocation-show-response": [
    ...["candidate_nodes", "created_at", "extra", "last_error", "links", "name", "node_uuid", "owner"],
    ...["resource_class", "state", "traits", "updated_at", "uuid"],
  ],
} as const;
const sample = (name: keyof typeof SAMPLES): string[] => [...SAMPLES[name]].sort();

/** The headers every versioned answer carries: the version served, and Anvil's range. */
function expectVersionHeaders(headers: Headers, served: string): void {
  expect(headers.get("x-openstack-ironic-api-version")).toBe(served);
  expect(headers.get("x-openstack-ironic-api-minimum-version")).toBe("1.1");
  expect(headers.get("x-openstack-ironic-api-maximum-version")).toBe(MAX_VERSION_STRING);
}

beforeAll(async () => {
  ctx = await startConductor({ fakeDelayMs: 0 });
  const r = await api(`${ctx.url}/v1/nodes`, {
    method: "POST",
    body: { driver: "fake-hardware", name: "ref-a", resource_class: "ref" },
  });
  expect(r.status).toBe(201);
  node = (r.body as { uuid: string }).uuid;
});
afterAll(async () => {
  await ctx?.stop();
});

describe("chassis (1.1)", () => {
  it("POST 201 with Location and the show sample's keys; list keys; DELETE 204", async () => {
    const created = await api(`${ctx.url}/v1/chassis`, {
      method: "POST",
      body: { description: "Sample chassis" },
      headers: latest,
    });
    expect(created.status).toBe(201);
    expect(keys(created.body)).toEqual(sample("chassis-show-response"));
    const uuid = (created.body as { uuid: string }).uuid;
    expect(created.headers.get("location")).toBe(`${ctx.url}/v1/chassis/${uuid}`);
    expectVersionHeaders(created.headers, MAX_VERSION_STRING);
    const list = await api(`${ctx.url}/v1/chassis`, { headers: latest });
    expect(list.status).toBe(200);
    expect(keys(firstOf(list.body, "chassis"))).toEqual(sample("chassis-list-response"));
    expect((await api(`${ctx.url}/v1/chassis/${uuid}`, { method: "DELETE", headers: latest })).status).toBe(
      204,
    );
  });
});

describe("deploy templates (1.55)", () => {
  const body = {
    name: "CUSTOM_HYPERTHREADING_ON",
    extra: {},
    steps: [
      {
        interface: "bios",
        step: "apply_configuration",
        args: { settings: [{ name: "LogicalProc", value: "Enabled" }] },
        priority: 150,
      },
    ],
  };

  it("POST 201 with the create sample's keys, list keys, DELETE 204; 404 at 1.54", async () => {
    const created = await api(`${ctx.url}/v1/deploy_templates`, { method: "POST", body, headers: latest });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(keys(created.body)).toEqual(sample("deploy-template-create-response"));
    expectVersionHeaders(created.headers, MAX_VERSION_STRING);
    const list = await api(`${ctx.url}/v1/deploy_templates`, { headers: latest });
    expect(keys(firstOf(list.body, "deploy_templates"))).toEqual(sample("deploy-template-list-response"));
    expect((await api(`${ctx.url}/v1/deploy_templates`, { headers: at("1.54") })).status).toBe(404);
    const uuid = (created.body as { uuid: string }).uuid;
    const gone = await api(`${ctx.url}/v1/deploy_templates/${uuid}`, { method: "DELETE", headers: latest });
    expect(gone.status).toBe(204);
  });
});

describe("runbooks (1.92)", () => {
  it("POST 201 with the create sample's keys, list keys, DELETE 204; 404 at 1.91", async () => {
    const created = await api(`${ctx.url}/v1/runbooks`, {
      method: "POST",
      headers: latest,
      body: {
        name: "CUSTOM_AWESOME",
        extra: {},
        steps: [{ interface: "deploy", step: "erase_devices_metadata", args: {}, order: 1 }],
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    // Ironic's sample predates 1.112, which adds description and traits (its convert_with_links)
    expect(keys(created.body)).toEqual(
      [...sample("runbook-create-response"), "description", "traits"].sort(),
    );
    const shown = await api(`${ctx.url}/v1/runbooks/CUSTOM_AWESOME`, { headers: at("1.111") });
    expect(keys(shown.body)).toEqual(sample("runbook-create-response"));
    expectVersionHeaders(created.headers, MAX_VERSION_STRING);
    const list = await api(`${ctx.url}/v1/runbooks`, { headers: latest });
    expect(keys(firstOf(list.body, "runbooks"))).toEqual(sample("runbook-list-response"));
    expect((await api(`${ctx.url}/v1/runbooks`, { headers: at("1.91") })).status).toBe(404);
    const uuid = (created.body as { uuid: string }).uuid;
    expect((await api(`${ctx.url}/v1/runbooks/${uuid}`, { method: "DELETE", headers: latest })).status).toBe(
      204,
    );
  });
});

describe("inspection rules (1.96)", () => {
  it("POST 201 with the create sample's keys, list keys, DELETE 204; 404 at 1.95", async () => {
    const created = await api(`${ctx.url}/v1/inspection_rules`, {
      method: "POST",
      headers: latest,
      body: {
        description: "BMC credentials",
        phase: "main",
        priority: 100,
        sensitive: false,
        conditions: [
          { op: "contains", args: { value: "{inventory[system_vendor][manufacturer]}", regex: "(?i)dell" } },
        ],
        actions: [{ op: "set-attribute", args: { path: "/properties/inspected", value: "yes" } }],
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(keys(created.body)).toEqual(sample("inspection-rule-create-response"));
    expectVersionHeaders(created.headers, MAX_VERSION_STRING);
    const list = await api(`${ctx.url}/v1/inspection_rules`, { headers: latest });
    expect(keys(firstOf(list.body, "inspection_rules"))).toEqual(sample("inspection-rule-list-response"));
    expect((await api(`${ctx.url}/v1/inspection_rules`, { headers: at("1.95") })).status).toBe(404);
    const uuid = (created.body as { uuid: string }).uuid;
    const gone = await api(`${ctx.url}/v1/inspection_rules/${uuid}`, { method: "DELETE", headers: latest });
    expect(gone.status).toBe(204);
  });
});

describe("shards (1.82)", () => {
  it("GET 200 with the sample's entry keys, 404 at 1.81", async () => {
    const r = await api(`${ctx.url}/v1/shards`, { headers: at("1.82") });
    expect(r.status).toBe(200);
    expect(keys(r.body)).toEqual(["shards"]);
    expect(keys(firstOf(r.body, "shards"))).toEqual(sample("shards-list-response"));
    expectVersionHeaders(r.headers, "1.82");
    expect((await api(`${ctx.url}/v1/shards`, { headers: at("1.81") })).status).toBe(404);
  });
});

describe("volume connectors and targets (1.32)", () => {
  it("POST 201 with the create samples' keys, list keys, the node's volume links; 404 at 1.31", async () => {
    const connector = await api(`${ctx.url}/v1/volume/connectors`, {
      method: "POST",
      headers: latest,
      body: { node_uuid: node, type: "iqn", connector_id: "iqn.2017-07.org.openstack:01:d9a51732c3f" },
    });
    expect(connector.status, JSON.stringify(connector.body)).toBe(201);
    expect(keys(connector.body)).toEqual(sample("volume-connector-create-response"));
    expectVersionHeaders(connector.headers, MAX_VERSION_STRING);
    const target = await api(`${ctx.url}/v1/volume/targets`, {
      method: "POST",
      headers: latest,
      body: {
        node_uuid: node,
        volume_type: "iscsi",
        boot_index: 0,
        volume_id: "04452bed-5367-4202-8bf5-de4335ac56d2",
      },
    });
    expect(target.status, JSON.stringify(target.body)).toBe(201);
    expect(keys(target.body)).toEqual(sample("volume-target-create-response"));
    const connectors = await api(`${ctx.url}/v1/volume/connectors`, { headers: latest });
    expect(keys(firstOf(connectors.body, "connectors"))).toEqual(sample("volume-connector-list-response"));
    const targets = await api(`${ctx.url}/v1/volume/targets`, { headers: latest });
    expect(keys(firstOf(targets.body, "targets"))).toEqual(sample("volume-target-list-response"));
    const volume = await api(`${ctx.url}/v1/volume`, { headers: latest });
    expect(volume.status).toBe(200);
    expect(keys(volume.body)).toEqual(sample("volume-list-response"));
    expect((await api(`${ctx.url}/v1/volume/connectors`, { headers: at("1.31") })).status).toBe(404);
    for (const [kind, r] of [
      ["targets", target],
      ["connectors", connector],
    ] as const) {
      const uuid = (r.body as { uuid: string }).uuid;
      const gone = await api(`${ctx.url}/v1/volume/${kind}/${uuid}`, { method: "DELETE", headers: latest });
      expect(gone.status).toBe(204);
    }
  });
});

describe("the node's own endpoints", () => {
  it("boot_mode and secure_boot (1.76): PUT 202 with no body; 404 at 1.75", async () => {
    const mode = await api(`${ctx.url}/v1/nodes/${node}/states/boot_mode`, {
      method: "PUT",
      headers: latest,
      body: { target: "uefi" },
    });
    expect(mode.status).toBe(202);
    expect(mode.body).toBeNull();
    expectVersionHeaders(mode.headers, MAX_VERSION_STRING);
    expect((await settled(node)).boot_mode).toBe("uefi");
    const secure = await api(`${ctx.url}/v1/nodes/${node}/states/secure_boot`, {
      method: "PUT",
      headers: latest,
      body: { target: true },
    });
    expect(secure.status).toBe(202);
    const early = await api(`${ctx.url}/v1/nodes/${node}/states/boot_mode`, {
      method: "PUT",
      headers: at("1.75"),
      body: { target: "bios" },
    });
    expect(early.status).toBe(404);
  });

  it("vmedia: POST 204 (1.89), GET 200 (1.93), DELETE 204; 404 before each", async () => {
    const url = `${ctx.url}/v1/nodes/${node}/vmedia`;
    const attach = { device_type: "cdrom", image_url: "http://127.0.0.1:1/image.iso" };
    expect((await api(url, { method: "POST", headers: at("1.88"), body: attach })).status).toBe(404);
    const attached = await api(url, { method: "POST", headers: at("1.89"), body: attach });
    expect(attached.status, JSON.stringify(attached.body)).toBe(204);
    expect(attached.body).toBeNull();
    expectVersionHeaders(attached.headers, "1.89");
    expect((await api(url, { headers: at("1.92") })).status).toBe(404);
    const shown = await api(url, { headers: at("1.93") });
    expect(shown.status).toBe(200);
    expect(typeof shown.body).toBe("object");
    const detached = await api(url, { method: "DELETE", headers: at("1.89") });
    expect(detached.status).toBe(204);
  });

  it("a port created with node_ident (a node name) at 1.94 is 201; before, Ironic's 406", async () => {
    const before = await api(`${ctx.url}/v1/ports`, {
      method: "POST",
      headers: at("1.93"),
      body: { node_ident: "ref-a", address: "52:54:00:12:34:01" },
    });
    expect(before.status).toBe(406);
    const created = await api(`${ctx.url}/v1/ports`, {
      method: "POST",
      headers: at("1.94"),
      body: { node_ident: "ref-a", address: "52:54:00:12:34:01" },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ node_uuid: node, address: "52:54:00:12:34:01" });
    expectVersionHeaders(created.headers, "1.94");
  });

  it("the node's allocation (1.52): GET 200 with the show sample's keys, DELETE 204, then 404", async () => {
    for (const target of ["manage", "provide"] as const) {
      const r = await api(`${ctx.url}/v1/nodes/${node}/states/provision`, {
        method: "PUT",
        body: { target },
      });
      expect(r.status).toBe(202);
      await waitForState(ctx.url, node, target === "manage" ? "manageable" : "available");
    }
    // fake-hardware has no power state until a power action (Ironic's), and allocations skip such nodes
    await powerOff(ctx.url, node);
    const allocated = await api(`${ctx.url}/v1/allocations`, {
      method: "POST",
      headers: latest,
      body: { resource_class: "ref", name: "ref-alloc" },
    });
    expect(allocated.status).toBe(201);
    const url = `${ctx.url}/v1/nodes/${node}/allocation`;
    const shown = await api(url, { headers: at("1.52") });
    expect(shown.status).toBe(200);
    expect((shown.body as { node_uuid: string }).node_uuid).toBe(node);
    const full = await api(url, { headers: latest });
    expect(keys(full.body)).toEqual(sample("allocation-show-response"));
    expectVersionHeaders(full.headers, MAX_VERSION_STRING);
    expect((await api(url, { headers: at("1.51") })).status).toBe(404);
    expect((await api(url, { method: "DELETE", headers: at("1.52") })).status).toBe(204);
    expect((await api(url, { headers: at("1.52") })).status).toBe(404);
  });
});

/** Waits for the node's lock to be released (a background change done), and returns the node. */
function settled(uuid: string): Promise<{ power_state: string | null; boot_mode: string | null }> {
  return until(
    async () => {
      const body = (await api(`${ctx.url}/v1/nodes/${uuid}`, { headers: latest })).body as {
        reservation: string | null;
        target_power_state: string | null;
        power_state: string | null;
        boot_mode: string | null;
      };
      return body.reservation === null && body.target_power_state === null ? body : undefined;
    },
    { what: `${uuid} to settle` },
  );
}
