import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  api,
  faultOf,
  powerSettled,
  provisionThrough,
  released,
  startConductor,
  waitForState,
} from "../helpers/conductor.ts";

let ctx: Awaited<ReturnType<typeof startConductor>>;

/** One raw request at a microversion (Ironic's answers differ by version). */
const at = (version: string, path: string, init: { method?: string; body?: unknown } = {}) =>
  api(`${ctx.url}${path}`, { ...init, headers: { "X-OpenStack-Ironic-API-Version": version } });
const keys = (body: unknown): string[] => Object.keys(body as object).sort();

async function enroll(extra: Record<string, unknown> = {}): Promise<string> {
  const made = await at("1.78", "/v1/nodes", { method: "POST", body: { driver: "fake-hardware", ...extra } });
  expect(made.status).toBe(201);
  return (made.body as { uuid: string }).uuid;
}

async function power(node: string, target: "power on" | "power off"): Promise<void> {
  const put = await at("1.78", `/v1/nodes/${node}/states/power`, { method: "PUT", body: { target } });
  expect(put.status).toBe(202);
  // settled and released: a change sent while the power task still holds the lock is refused 409
  await powerSettled({ url: ctx.url, headers: { "X-OpenStack-Ironic-API-Version": "1.78" } }, node, target);
}

beforeAll(async () => {
  ctx = await startConductor();
});
afterAll(async () => {
  await ctx.stop();
});

describe("chassis (1.1)", () => {
  it("creates, shows, lists, patches and deletes with Ironic's shapes and headers", async () => {
    const made = await at("1.1", "/v1/chassis", {
      method: "POST",
      body: { description: "rack 7", extra: { row: "b" } },
    });
    expect(made.status).toBe(201);
    const chassis = made.body as { uuid: string; links: unknown[]; nodes: unknown[] };
    expect(keys(chassis)).toEqual([
      "created_at",
      "description",
      "extra",
      "links",
      "nodes",
      "updated_at",
      "uuid",
    ]);
    expect(made.headers.get("location")).toBe(`${ctx.url}/v1/chassis/${chassis.uuid}`);
    expect(made.headers.get("x-openstack-ironic-api-version")).toBe("1.1");
    expect(made.headers.get("x-openstack-ironic-api-minimum-version")).toBe("1.1");

    const list = (await at("1.1", "/v1/chassis")).body as { chassis: Record<string, unknown>[] };
    const item = list.chassis.find((c) => c.uuid === chassis.uuid)!;
    expect(keys(item)).toEqual(["description", "links", "uuid"]);
    const detail = (await at("1.1", "/v1/chassis/detail")).body as { chassis: Record<string, unknown>[] };
    expect(keys(detail.chassis.find((c) => c.uuid === chassis.uuid))).toContain("extra");
    const fields = (await at("1.8", `/v1/chassis/${chassis.uuid}?fields=extra`)).body;
    expect(keys(fields)).toEqual(["extra", "links"]);

    const patched = await at("1.1", `/v1/chassis/${chassis.uuid}`, {
      method: "PATCH",
      body: [{ op: "replace", path: "/description", value: "rack 8" }],
    });
    expect(patched.status).toBe(200);
    expect((patched.body as { description: string }).description).toBe("rack 8");
    const internal = await at("1.1", `/v1/chassis/${chassis.uuid}`, {
      method: "PATCH",
      body: [{ op: "replace", path: "/created_at", value: "x" }],
    });
    expect(internal.status).toBe(400);

    expect((await at("1.1", `/v1/chassis/${chassis.uuid}`, { method: "DELETE" })).status).toBe(204);
    const gone = await at("1.1", `/v1/chassis/${chassis.uuid}`);
    expect(gone.status).toBe(404);
    expect(faultOf(gone.body)).toBe(`Chassis ${chassis.uuid} could not be found.`);
  });

  it("refuses bad bodies with Ironic's envelope, never a 500", async () => {
    for (const body of [{ bogus: 1 }, { description: "x".repeat(256) }, { uuid: "not-a-uuid" }, [1], "x"]) {
      const refused = await at("1.1", "/v1/chassis", { method: "POST", body });
      expect(refused.status).toBe(400);
      expect(faultOf(refused.body)).not.toBe("");
    }
  });

  it("puts nodes in a chassis, lists them, and refuses to delete it while they are in it", async () => {
    const chassis = ((await at("1.1", "/v1/chassis", { method: "POST", body: {} })).body as { uuid: string })
      .uuid;
    const missing = randomUUID();
    const bad = await at("1.78", "/v1/nodes", {
      method: "POST",
      body: { driver: "fake-hardware", chassis_uuid: missing },
    });
    expect(bad.status).toBe(400);
    expect(faultOf(bad.body)).toBe(`Chassis ${missing} could not be found.`);
    const node = await enroll({ chassis_uuid: chassis });
    const other = await enroll();
    const inChassis = (await at("1.78", `/v1/chassis/${chassis}/nodes`)).body as {
      nodes: { uuid: string }[];
    };
    expect(inChassis.nodes.map((n) => n.uuid)).toEqual([node]);
    const filtered = (await at("1.78", `/v1/nodes?chassis_uuid=${chassis}`)).body as {
      nodes: { uuid: string }[];
    };
    expect(filtered.nodes.map((n) => n.uuid)).toEqual([node]);

    const refused = await at("1.1", `/v1/chassis/${chassis}`, { method: "DELETE" });
    expect(refused.status).toBe(400);
    expect(faultOf(refused.body)).toBe(
      `Cannot complete the requested action because chassis ${chassis} contains nodes.`,
    );
    const moved = await at("1.78", `/v1/nodes/${other}`, {
      method: "PATCH",
      body: [{ op: "add", path: "/chassis_uuid", value: chassis }],
    });
    expect((moved.body as { chassis_uuid: string }).chassis_uuid).toBe(chassis);
    // leaving a chassis needs 1.25
    const early = await at("1.24", `/v1/nodes/${node}`, {
      method: "PATCH",
      body: [{ op: "remove", path: "/chassis_uuid" }],
    });
    expect(early.status).toBe(406);
    for (const n of [node, other]) {
      const left = await at("1.25", `/v1/nodes/${n}`, {
        method: "PATCH",
        body: [{ op: "remove", path: "/chassis_uuid" }],
      });
      expect(left.status).toBe(200);
    }
    expect((await at("1.1", `/v1/chassis/${chassis}`, { method: "DELETE" })).status).toBe(204);
  });
});

describe("volume connectors and targets (1.32)", () => {
  it("are not there below 1.32", async () => {
    for (const path of ["/v1/volume", "/v1/volume/connectors", "/v1/volume/targets"]) {
      expect((await at("1.31", path)).status).toBe(404);
      expect((await at("1.32", path)).status).toBe(200);
    }
    const root = (await at("1.32", "/v1/volume")).body;
    expect(keys(root)).toEqual(["connectors", "links", "targets"]);
    const v1 = (await at("1.32", "/v1")).body;
    expect(keys(v1)).toContain("volume");
    expect(keys((await at("1.31", "/v1")).body)).not.toContain("volume");
  });

  it("answers Nova's destroy() call with an empty list for a node without targets", async () => {
    const node = await enroll();
    const answer = await at("1.32", `/v1/nodes/${node}/volume/targets`);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ targets: [] });
    const detail = await at("1.32", `/v1/nodes/${node}/volume/targets?detail=True`);
    expect(detail.body).toEqual({ targets: [] });
    // the forms Nova's ironic driver sends through openstacksdk and through ironicclient
    for (const path of [
      `/v1/volume/targets/detail?node=${node}`,
      `/v1/volume/targets?node=${node}&detail=True`,
    ]) {
      const listed = await at("1.32", path);
      expect([listed.status, listed.body]).toEqual([200, { targets: [] }]);
    }
  });

  it("keeps connector and target CRUD with Ironic's shapes, filters and uniqueness", async () => {
    const node = await enroll();
    const connector = await at("1.32", "/v1/volume/connectors", {
      method: "POST",
      body: { node_uuid: node, type: "iqn", connector_id: `iqn.2026-11.org.anvil:${node}` },
    });
    expect(connector.status).toBe(201);
    const c = connector.body as { uuid: string };
    expect(keys(c)).toEqual([
      "connector_id",
      "created_at",
      "extra",
      "links",
      "node_uuid",
      "type",
      "updated_at",
      "uuid",
    ]);
    expect(connector.headers.get("location")).toBe(`${ctx.url}/v1/volume/connectors/${c.uuid}`);
    const clash = await at("1.32", "/v1/volume/connectors", {
      method: "POST",
      body: { node_uuid: await enroll(), type: "iqn", connector_id: `iqn.2026-11.org.anvil:${node}` },
    });
    expect(clash.status).toBe(409);
    expect(faultOf(clash.body)).toBe(
      `A volume connector with type iqn and connector ID iqn.2026-11.org.anvil:${node} already exists.`,
    );
    const target = await at("1.32", "/v1/volume/targets", {
      method: "POST",
      body: {
        node_uuid: node,
        volume_type: "iscsi",
        volume_id: "vol-1",
        boot_index: 0,
        properties: { auth_password: "s3cret" },
      },
    });
    expect(target.status).toBe(201);
    const t = target.body as { uuid: string; properties: Record<string, unknown> };
    expect(keys(t)).toEqual([
      "boot_index",
      "created_at",
      "extra",
      "links",
      "node_uuid",
      "properties",
      "updated_at",
      "uuid",
      "volume_id",
      "volume_type",
    ]);
    const again = await at("1.32", "/v1/volume/targets", {
      method: "POST",
      body: { node_uuid: node, volume_type: "iscsi", volume_id: "vol-2", boot_index: 0 },
    });
    expect(again.status).toBe(409);
    expect(faultOf(again.body)).toBe("A volume target with boot index '0' for the same node already exists.");

    const byNode = (await at("1.32", `/v1/volume/targets?node=${node}`)).body as {
      targets: Record<string, unknown>[];
    };
    expect(byNode.targets.map((x) => x.uuid)).toEqual([t.uuid]);
    expect(keys(byNode.targets[0])).toEqual([
      "boot_index",
      "links",
      "node_uuid",
      "uuid",
      "volume_id",
      "volume_type",
    ]);
    const sub = (await at("1.32", `/v1/nodes/${node}/volume/connectors`)).body as {
      connectors: { uuid: string }[];
    };
    expect(sub.connectors.map((x) => x.uuid)).toEqual([c.uuid]);
    expect((await at("1.32", `/v1/nodes/${node}/volume/connectors/${c.uuid}`)).status).toBe(400);
    const noNode = await at("1.32", `/v1/volume/connectors?node=${randomUUID()}`);
    expect(noNode.status).toBe(404);

    const notAllowed = await at("1.32", "/v1/volume/targets", {
      method: "POST",
      body: { node_uuid: randomUUID(), volume_type: "iscsi", volume_id: "vol-3", boot_index: 0 },
    });
    expect(notAllowed.status).toBe(400);
    expect(faultOf(notAllowed.body)).toMatch(/^Invalid input for field\/attribute node_uuid/);
  });

  it("changes a node's volume resources only while it is powered off (Ironic's text)", async () => {
    const node = await enroll();
    const made = await at("1.32", "/v1/volume/targets", {
      method: "POST",
      body: { node_uuid: node, volume_type: "iscsi", volume_id: "vol-p", boot_index: 1 },
    });
    const uuid = (made.body as { uuid: string }).uuid;
    await power(node, "power on");
    const change = [{ op: "replace", path: "/boot_index", value: 2 }];
    const refused = await at("1.32", `/v1/volume/targets/${uuid}`, { method: "PATCH", body: change });
    expect(refused.status).toBe(400);
    expect(faultOf(refused.body)).toBe(
      `The requested action "volume target update" can not be performed on node "${node}" while it is in state "power on".`,
    );
    // an enrolled node's may go whatever its power (Ironic's DELETE_ALLOWED_STATES)
    const gone = await at("1.32", `/v1/volume/targets/${uuid}`, { method: "DELETE" });
    expect(gone.status).toBe(204);
    const again = await at("1.32", "/v1/volume/targets", {
      method: "POST",
      body: { node_uuid: node, volume_type: "iscsi", volume_id: "vol-p", boot_index: 1 },
    });
    const second = (again.body as { uuid: string }).uuid;
    await power(node, "power off");
    const patched = await at("1.32", `/v1/volume/targets/${second}`, { method: "PATCH", body: change });
    expect(patched.status).toBe(200);
    expect((patched.body as { boot_index: number }).boot_index).toBe(2);
    // a node another action holds is not changed behind its back: NodeLocked, and the record stays as it was
    await ctx.conductor.store.reserveNode(node, "another-conductor");
    try {
      const locked = await at("1.32", `/v1/volume/targets/${second}`, {
        method: "PATCH",
        body: [{ op: "replace", path: "/boot_index", value: 3 }],
      });
      expect(locked.status).toBe(409);
      expect(faultOf(locked.body)).toContain("is locked by host another-conductor");
      const kept = await at("1.32", `/v1/volume/targets/${second}`);
      expect((kept.body as { boot_index: number }).boot_index).toBe(2);
    } finally {
      await ctx.conductor.store.releaseNode(node, "another-conductor");
    }
  });
});

describe("deploy templates (1.55)", () => {
  const steps = [{ interface: "deploy", step: "deploy", args: {}, priority: 10 }];

  it("are gated at 1.55: 404 to read, 405 to write", async () => {
    expect((await at("1.54", "/v1/deploy_templates")).status).toBe(404);
    const write = await at("1.54", "/v1/deploy_templates", {
      method: "POST",
      body: { name: "CUSTOM_X", steps },
    });
    expect(write.status).toBe(405);
    expect(faultOf(write.body)).toBe("The API version does not allow deploy templates");
    expect((await at("1.55", "/v1/deploy_templates")).status).toBe(200);
  });

  it("creates, shows by name, patches a step and deletes", async () => {
    const made = await at("1.55", "/v1/deploy_templates", {
      method: "POST",
      body: { name: "CUSTOM_CRUD", steps: [{ ...steps[0], args: { password: "hunter2" } }] },
    });
    expect(made.status).toBe(201);
    const t = made.body as { uuid: string; steps: { args: Record<string, unknown> }[] };
    expect(keys(t)).toEqual(["created_at", "extra", "links", "name", "steps", "updated_at", "uuid"]);
    expect(t.steps[0]?.args.password).toBe("******");
    const byName = await at("1.55", "/v1/deploy_templates/CUSTOM_CRUD");
    expect((byName.body as { uuid: string }).uuid).toBe(t.uuid);
    const list = (await at("1.55", "/v1/deploy_templates")).body as {
      deploy_templates: Record<string, unknown>[];
    };
    expect(keys(list.deploy_templates.find((x) => x.uuid === t.uuid))).toEqual(["links", "name", "uuid"]);
    const dup = await at("1.55", "/v1/deploy_templates", {
      method: "POST",
      body: { name: "CUSTOM_CRUD", steps },
    });
    expect(dup.status).toBe(409);
    expect(faultOf(dup.body)).toBe("A deploy template with name CUSTOM_CRUD already exists.");
    const patched = await at("1.55", `/v1/deploy_templates/${t.uuid}`, {
      method: "PATCH",
      body: [{ op: "replace", path: "/steps/0/priority", value: 42 }],
    });
    expect(patched.status).toBe(200);
    expect((patched.body as { steps: { priority: number }[] }).steps[0]?.priority).toBe(42);
    // the masked arguments it read, sent back whole, keep the real secret
    const echoed = (patched.body as { steps: unknown[] }).steps;
    await at("1.55", `/v1/deploy_templates/${t.uuid}`, {
      method: "PATCH",
      body: [{ op: "replace", path: "/steps", value: echoed }],
    });
    const stored = await ctx.conductor.store.getDeployTemplate(t.uuid);
    expect(stored?.steps[0]?.args.password).toBe("hunter2");
    expect((await at("1.55", "/v1/deploy_templates/CUSTOM_CRUD", { method: "DELETE" })).status).toBe(204);
    expect((await at("1.55", `/v1/deploy_templates/${t.uuid}`)).status).toBe(404);
  });

  it("refuses a bad name, a bad step and duplicate steps", async () => {
    const bodies = [
      { name: "lower_case", steps },
      { name: "CUSTOM_A", steps: [] },
      { name: "CUSTOM_A", steps: [{ interface: "boot", step: "x", args: {}, priority: 1 }] },
      { name: "CUSTOM_A", steps: [{ interface: "deploy", step: "x", priority: 1 }] },
      { name: "CUSTOM_A", steps: [...steps, ...steps] },
    ];
    for (const body of bodies) {
      const refused = await at("1.55", "/v1/deploy_templates", { method: "POST", body });
      expect(refused.status).toBe(400);
    }
    const dup = await at("1.55", "/v1/deploy_templates", { method: "POST", body: bodies[4] });
    expect(faultOf(dup.body)).toContain("Duplicate deploy steps");
  });
});

describe("deploy templates at deploy time", () => {
  const raid = { logical_disks: [{ size_gb: 10, raid_level: "1", is_root_volume: true }] };

  async function available(): Promise<string> {
    const node = await enroll();
    await provisionThrough({ url: ctx.url, headers: { "X-OpenStack-Ironic-API-Version": "1.78" } }, node, [
      ["manage", "manageable"],
      ["provide", "available"],
    ]);
    await released(ctx.url, node); // the test's PATCH and deploy come next
    return node;
  }
  const setInstance = (node: string, info: Record<string, unknown>) =>
    at("1.78", `/v1/nodes/${node}`, {
      method: "PATCH",
      body: Object.entries(info).map(([key, value]) => ({ op: "add", path: `/instance_info/${key}`, value })),
    });

  it("runs the steps of the templates the node's instance traits name", async () => {
    const made = await at("1.55", "/v1/deploy_templates", {
      method: "POST",
      body: {
        name: "CUSTOM_RAID1",
        steps: [
          { interface: "raid", step: "apply_configuration", args: { raid_config: raid }, priority: 150 },
        ],
      },
    });
    expect(made.status).toBe(201);
    const plain = await available();
    const raided = await available();
    await setInstance(plain, { image_source: "http://127.0.0.1/x.img", traits: ["CUSTOM_OTHER"] });
    await setInstance(raided, { image_source: "http://127.0.0.1/x.img", traits: ["CUSTOM_RAID1"] });
    for (const node of [plain, raided]) {
      const put = await at("1.78", `/v1/nodes/${node}/states/provision`, {
        method: "PUT",
        body: { target: "active" },
      });
      expect(put.status).toBe(202);
    }
    const done = await waitForState(ctx.url, raided, "active");
    expect(done.raid_config).toEqual(raid);
    const untouched = await waitForState(ctx.url, plain, "active");
    expect(untouched.raid_config).toEqual({});
  });

  it("refuses a deploy whose templates name a step the node lacks, naming the templates", async () => {
    await at("1.55", "/v1/deploy_templates", {
      method: "POST",
      body: {
        name: "CUSTOM_BIOS",
        steps: [{ interface: "bios", step: "apply_configuration", args: {}, priority: 5 }],
      },
    });
    const node = await available();
    await setInstance(node, { image_source: "http://127.0.0.1/x.img", traits: ["CUSTOM_BIOS"] });
    const put = await at("1.78", `/v1/nodes/${node}/states/provision`, {
      method: "PUT",
      body: { target: "active" },
    });
    expect(put.status).toBe(400);
    expect(faultOf(put.body)).toMatch(
      /^Validation of deploy steps from deploy templates matching this node's instance traits failed\. Matching deploy templates: CUSTOM_BIOS\. Errors: .*bios\.apply_configuration/,
    );
    expect(
      ((await at("1.78", `/v1/nodes/${node}`)).body as { provision_state: string }).provision_state,
    ).toBe("available");
  });

  it("refuses a deploy that would have to boot from a volume", async () => {
    const node = await available();
    await power(node, "power off");
    const target = await at("1.32", "/v1/volume/targets", {
      method: "POST",
      body: { node_uuid: node, volume_type: "iscsi", volume_id: "boot", boot_index: 0 },
    });
    expect(target.status).toBe(201);
    const put = await at("1.78", `/v1/nodes/${node}/states/provision`, {
      method: "PUT",
      body: { target: "active" },
    });
    expect(put.status).toBe(400);
    expect(faultOf(put.body)).toContain("booting from a volume is not supported");
  });
});

describe("storage_interface", () => {
  it("is noop only: another on create or PATCH is a 400, not stored", async () => {
    const refused = await at("1.78", "/v1/nodes", {
      method: "POST",
      body: { driver: "fake-hardware", storage_interface: "cinder" },
    });
    expect(refused.status).toBe(400);
    const node = await enroll({ storage_interface: "noop" });
    const patched = await at("1.78", `/v1/nodes/${node}`, {
      method: "PATCH",
      body: [{ op: "replace", path: "/storage_interface", value: "cinder" }],
    });
    expect(patched.status).toBe(400);
    const shown = (await at("1.78", `/v1/nodes/${node}`)).body as { storage_interface: string };
    expect(shown.storage_interface).toBe("noop");
  });
});

describe("hostile bodies", () => {
  it("never get a 500 from any create or PATCH of these resources (generated)", async () => {
    const node = await enroll();
    const chassis = ((await at("1.1", "/v1/chassis", { method: "POST", body: {} })).body as { uuid: string })
      .uuid;
    const connector = (
      (
        await at("1.32", "/v1/volume/connectors", {
          method: "POST",
          body: { node_uuid: node, type: "ip", connector_id: `10.0.0.${Math.floor(Math.random() * 200)}` },
        })
      ).body as { uuid: string }
    ).uuid;
    const template = (
      (
        await at("1.55", "/v1/deploy_templates", {
          method: "POST",
          body: {
            name: "CUSTOM_HOSTILE",
            steps: [{ interface: "deploy", step: "deploy", args: {}, priority: 1 }],
          },
        })
      ).body as { uuid: string }
    ).uuid;
    const targets = [
      ["POST", "/v1/chassis"],
      ["POST", "/v1/volume/connectors"],
      ["POST", "/v1/volume/targets"],
      ["POST", "/v1/deploy_templates"],
      ["PATCH", `/v1/chassis/${chassis}`],
      ["PATCH", `/v1/volume/connectors/${connector}`],
      ["PATCH", `/v1/deploy_templates/${template}`],
    ] as const;
    const op = fc.record({
      op: fc.constantFrom("add", "replace", "remove", "move"),
      path: fc.constantFrom(
        "/extra/a",
        "/steps/0/priority",
        "/steps/9",
        "/node_uuid",
        "/name",
        "/type",
        "/x",
      ),
      value: fc.jsonValue({ maxDepth: 2 }),
    });
    const body = fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.array(op, { maxLength: 3 }));
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...targets), body, async ([method, path], value) => {
        const answer = await at("1.78", path, { method, body: value });
        expect(answer.status).toBeLessThan(500);
        if (answer.status >= 400) expect(faultOf(answer.body)).not.toBe("");
      }),
      { numRuns: 150 },
    );
  });
});
