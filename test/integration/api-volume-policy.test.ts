import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basic, writeUserFiles, type TestUser } from "../helpers/auth.ts";
import { api, faultOf, powerOff, startConductor } from "../helpers/conductor.ts";

const USERS: TestUser[] = [
  { name: "sysadmin", password: "pw-sysadmin", role: "admin" },
  { name: "sysreader", password: "pw-sysreader", role: "reader" },
  { name: "a-admin", password: "pw-a-admin", role: "admin", project: "A" },
  { name: "a-member", password: "pw-a-member", role: "member", project: "A" },
  { name: "a-reader", password: "pw-a-reader", role: "reader", project: "A" },
  { name: "b-admin", password: "pw-b-admin", role: "admin", project: "B" },
  { name: "b-member", password: "pw-b-member", role: "member", project: "B" },
  { name: "c-admin", password: "pw-c-admin", role: "admin", project: "C" },
];
type User =
  "sysadmin" | "sysreader" | "a-admin" | "a-member" | "a-reader" | "b-admin" | "b-member" | "c-admin";

const dir = mkdtempSync(join(tmpdir(), "anvil-volume-policy-"));
const files = writeUserFiles(dir, USERS);
let ctx: Awaited<ReturnType<typeof startConductor>>;
const nodes: Record<string, string> = {};

const as = (user: User, path: string, init: { method?: string; body?: unknown } = {}) =>
  api(`${ctx.url}${path}`, {
    ...init,
    headers: { ...basic(user, `pw-${user}`), "X-OpenStack-Ironic-API-Version": "1.78" },
  });

async function statuses(
  path: string,
  expected: [User, number][],
  init: (user: User) => { method?: string; body?: unknown } = () => ({}),
): Promise<void> {
  const got: [User, number][] = [];
  for (const [user] of expected) got.push([user, (await as(user, path, init(user))).status]);
  expect(got).toEqual(expected);
}

async function connector(node: string, id: string): Promise<string> {
  const made = await as("sysadmin", "/v1/volume/connectors", {
    method: "POST",
    body: { node_uuid: nodes[node], type: "iqn", connector_id: id },
  });
  expect(made.status).toBe(201);
  return (made.body as { uuid: string }).uuid;
}

beforeAll(async () => {
  ctx = await startConductor({
    auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile },
  });
  for (const [name, extra] of [
    ["nA", { owner: "A" }],
    ["nAB", { owner: "A", lessee: "B" }],
    ["nX", {}],
  ] as const) {
    const made = await as("sysadmin", "/v1/nodes", {
      method: "POST",
      body: { driver: "fake-hardware", name, ...extra },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    nodes[name] = (made.body as { uuid: string }).uuid;
    // volume changes need the node powered off and released: the 202 read, then no 5 s cap on the wait
    await powerOff(
      {
        url: ctx.url,
        headers: { ...basic("sysadmin", "pw-sysadmin"), "X-OpenStack-Ironic-API-Version": "1.78" },
      },
      name,
    );
  }
});
afterAll(async () => {
  await ctx.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("volume resources are scoped through their node (Ironic's owner/lessee policy)", () => {
  it("lists the fleet for system readers, the project's nodes' resources for a project", async () => {
    const ids = {
      nA: await connector("nA", "iqn.a"),
      nAB: await connector("nAB", "iqn.ab"),
      nX: await connector("nX", "iqn.x"),
    };
    const listed = async (user: User) =>
      ((await as(user, "/v1/volume/connectors")).body as { connectors: { uuid: string }[] }).connectors
        .map((c) => c.uuid)
        .sort();
    expect(await listed("sysreader")).toEqual([ids.nA, ids.nAB, ids.nX].sort());
    expect(await listed("a-reader")).toEqual([ids.nA, ids.nAB].sort());
    expect(await listed("b-member")).toEqual([ids.nAB]);
    expect(await listed("c-admin")).toEqual([]);
    // a node the caller cannot see is not found, as a list filter or a parent
    await statuses(`/v1/volume/connectors?node=${nodes.nX}`, [
      ["sysreader", 200],
      ["a-admin", 404],
    ]);
    await statuses(`/v1/nodes/nX/volume/connectors`, [
      ["sysreader", 200],
      ["a-admin", 404],
    ]);
    await statuses(`/v1/volume/connectors/${ids.nX}`, [
      ["sysreader", 200],
      ["a-reader", 404],
    ]);
    await statuses(`/v1/volume/connectors/${ids.nA}`, [
      ["a-reader", 200],
      ["b-member", 404],
    ]);
  });

  it("creates and deletes for system members and owner or lessee admins only", async () => {
    const body = (user: User) => ({
      method: "POST",
      body: { node_uuid: nodes.nAB, type: "wwpn", connector_id: `wwpn-${user}` },
    });
    await statuses(
      "/v1/volume/connectors",
      [
        ["a-member", 403],
        ["b-member", 403],
        ["c-admin", 403],
        ["a-admin", 201],
        ["b-admin", 201],
        ["sysadmin", 201],
      ],
      body,
    );
    const denied = await as("a-member", "/v1/volume/connectors", body("a-member"));
    expect(faultOf(denied.body)).toBe("Access was denied to the following resource: baremetal:volume:create");
    const mine = await connector("nAB", "iqn.to-delete");
    await statuses(
      `/v1/volume/connectors/${mine}`,
      [
        ["a-member", 403],
        ["b-member", 403],
        ["b-admin", 204],
      ],
      () => ({ method: "DELETE" }),
    );
  });

  it("updates for owner members and lessee admins, not lessee members", async () => {
    const mine = await connector("nAB", "iqn.to-update");
    const patch = (user: User) => ({
      method: "PATCH",
      body: [{ op: "add", path: "/extra/by", value: user }],
    });
    await statuses(
      `/v1/volume/connectors/${mine}`,
      [
        ["b-member", 403],
        ["a-reader", 403],
        ["a-member", 200],
        ["b-admin", 200],
      ],
      patch,
    );
    // moving it to a node the caller cannot see, or of another owner, is the same 400 (Ironic's text)
    for (const [user, to] of [
      ["b-admin", nodes.nA],
      ["sysadmin", nodes.nX],
    ] as const) {
      const moved = await as(user, `/v1/volume/connectors/${mine}`, {
        method: "PATCH",
        body: [{ op: "replace", path: "/node_uuid", value: to }],
      });
      expect(moved.status).toBe(400);
      expect(faultOf(moved.body)).toBe(
        `Unable to apply the requested node_uuid '${to}'. Requested value was invalid.`,
      );
    }
    const same = await as("a-member", `/v1/volume/connectors/${mine}`, {
      method: "PATCH",
      body: [{ op: "replace", path: "/node_uuid", value: nodes.nA }],
    });
    expect(same.status).toBe(200);
    expect((same.body as { node_uuid: string }).node_uuid).toBe(nodes.nA);
  });

  it("redacts target properties for callers without view_target_properties", async () => {
    const made = await as("sysadmin", "/v1/volume/targets", {
      method: "POST",
      body: {
        node_uuid: nodes.nA,
        volume_type: "iscsi",
        volume_id: "v1",
        boot_index: 0,
        properties: { lun: 3 },
      },
    });
    const uuid = (made.body as { uuid: string }).uuid;
    const props = async (user: User) =>
      ((await as(user, `/v1/volume/targets/${uuid}`)).body as { properties: Record<string, unknown> })
        .properties;
    expect(await props("sysreader")).toEqual({ lun: 3 });
    expect(await props("a-admin")).toEqual({ lun: 3 });
    expect(JSON.stringify(await props("a-reader"))).toContain("baremetal:volume:view_target_properties");
  });
});

describe("chassis and deploy templates are the system's", () => {
  it("answers each role as Ironic's defaults", async () => {
    await statuses("/v1/chassis", [
      ["sysreader", 200],
      ["a-admin", 403],
    ]);
    await statuses(
      "/v1/chassis",
      [
        ["sysreader", 403],
        ["a-admin", 403],
        ["sysadmin", 201],
      ],
      () => ({ method: "POST", body: {} }),
    );
    await statuses("/v1/deploy_templates", [
      ["sysreader", 200],
      ["a-admin", 403],
    ]);
    await statuses(
      "/v1/deploy_templates",
      [
        ["a-admin", 403],
        ["sysadmin", 201],
      ],
      () => ({
        method: "POST",
        body: {
          name: "CUSTOM_POLICY",
          steps: [{ interface: "deploy", step: "deploy", args: {}, priority: 1 }],
        },
      }),
    );
  });
});
