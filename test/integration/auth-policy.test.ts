import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basic, writeUserFiles, type TestUser } from "../helpers/auth.ts";
import { api, faultOf, powerOff, startConductor, waitForState } from "../helpers/conductor.ts";
import { baremetal } from "../../scripts/lab/baremetal.ts";

const run = promisify(execFile);
const USERS: TestUser[] = [
  { name: "sysadmin", password: "pw-sysadmin", role: "admin" },
  { name: "sysreader", password: "pw-sysreader", role: "reader" },
  { name: "a-admin", password: "pw-a-admin", role: "admin", project: "A" },
  { name: "a-member", password: "pw-a-member", role: "member", project: "A" },
  { name: "a-reader", password: "pw-a-reader", role: "reader", project: "A" },
  { name: "b-admin", password: "pw-b-admin", role: "admin", project: "B" },
  { name: "b-member", password: "pw-b-member", role: "member", project: "B" },
  { name: "nobody", password: "pw-nobody" },
];
type User = (typeof USERS)[number]["name"];
const password = (user: User): string => `pw-${user}`;

const dir = mkdtempSync(join(tmpdir(), "anvil-policy-"));
const files = writeUserFiles(dir, USERS);
let ctx: Awaited<ReturnType<typeof startConductor>>;
const uuids: Record<string, string> = {};

/** One request as `user` (undefined: no credentials). */
const as = (user: User | undefined, path: string, init: { method?: string; body?: unknown } = {}) =>
  api(`${ctx.url}${path}`, { ...init, headers: user ? basic(user, password(user)) : {} });

async function reach(node: string, state: string): Promise<void> {
  await waitForState({ url: ctx.url, headers: basic("sysadmin", password("sysadmin")) }, node, state);
}

async function enroll(name: string, extra: Record<string, unknown>, available = false): Promise<string> {
  const created = await as("sysadmin", "/v1/nodes", {
    method: "POST",
    body: {
      driver: "fake-hardware",
      name,
      driver_info: { ipmi_address: "10.9.9.9", ipmi_password: "bmc-secret" },
      ...extra,
    },
  });
  expect(created.status).toBe(201);
  const uuid = (created.body as { uuid: string }).uuid;
  if (available) {
    for (const [target, state] of [
      ["manage", "manageable"],
      ["provide", "available"],
    ] as const) {
      await as("sysadmin", `/v1/nodes/${uuid}/states/provision`, { method: "PUT", body: { target } });
      await reach(uuid, state);
    }
    await powerOff({ url: ctx.url, headers: basic("sysadmin", password("sysadmin")) }, uuid);
  }
  uuids[name] = uuid;
  return uuid;
}

beforeAll(async () => {
  ctx = await startConductor({
    auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile },
  });
  await enroll("nA", { owner: "A" });
  await enroll("nAB", { owner: "A", lessee: "B" }, true);
  await enroll("nX", {});
  await enroll("alloc-a", { owner: "A", resource_class: "alloc" }, true);
  await enroll("alloc-b", { owner: "B", resource_class: "alloc" }, true);
});
afterAll(async () => {
  await ctx.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** [user, expected status] for one request. */
async function expectStatuses(
  path: string,
  expected: [User | undefined, number][],
  init: { method?: string; body?: unknown } = {},
): Promise<void> {
  const got: [User | undefined, number][] = [];
  for (const [user] of expected) got.push([user, (await as(user, path, init)).status]);
  expect(got).toEqual(expected);
}

describe("per role and project, each endpoint answers as Ironic's policy", () => {
  it("GET a node: 404 for who may not see it (existence hidden)", async () => {
    await expectStatuses(`/v1/nodes/nA`, [
      [undefined, 401],
      ["sysadmin", 200],
      ["sysreader", 200],
      ["a-member", 200],
      ["a-reader", 200],
      ["b-member", 404],
      ["nobody", 404],
    ]);
  });

  it("GET a node that does not exist: 404 for system users, 403 for project users (Ironic's order)", async () => {
    await expectStatuses(`/v1/nodes/no-such-node`, [
      ["sysadmin", 404],
      ["sysreader", 404],
      ["a-member", 403],
      ["nobody", 403],
    ]);
    const r = await as("a-member", "/v1/nodes/no-such-node");
    expect(faultOf(r.body)).toBe("Access was denied to the following resource: baremetal:node:get");
  });

  it("deploy logs (Anvil's own rules): read as driver_info, collected as a console is opened", async () => {
    await expectStatuses(`/v1/nodes/nAB/logs`, [
      ["sysreader", 200],
      ["a-reader", 200],
      ["b-admin", 403],
      ["b-member", 403],
      ["nobody", 404],
    ]);
    // allowed callers reach the operation (409: no agent connected); the others stop at the policy
    await expectStatuses(
      `/v1/nodes/nAB/logs`,
      [
        ["sysadmin", 409],
        ["a-member", 409],
        ["sysreader", 403],
        ["a-reader", 403],
        ["b-admin", 403],
      ],
      { method: "POST" },
    );
  });

  it("lists: the fleet for system users, owned or leased nodes for a project", async () => {
    const names = async (user: User) =>
      ((await as(user, "/v1/nodes")).body as { nodes: { name: string }[] }).nodes.map((n) => n.name).sort();
    expect(await names("sysreader")).toEqual(["alloc-a", "alloc-b", "nA", "nAB", "nX"]);
    expect(await names("a-reader")).toEqual(["alloc-a", "nA", "nAB"]);
    expect(await names("b-member")).toEqual(["alloc-b", "nAB"]);
    await expectStatuses(`/v1/nodes?owner=B`, [
      ["a-member", 403],
      ["sysreader", 200],
    ]);
    await expectStatuses(`/v1/nodes`, [["nobody", 403]]);
    // in a detailed list, the leased node's driver_info is redacted, the owned one's is not
    const detail = (await as("b-member", "/v1/nodes/detail")).body as { nodes: Record<string, unknown>[] };
    const byName = new Map(detail.nodes.map((n) => [n.name, n]));
    expect(JSON.stringify(byName.get("nAB"))).not.toContain("10.9.9.9");
    expect(byName.get("alloc-b")?.driver_info).toMatchObject({ ipmi_address: "10.9.9.9" });
  });

  it("a lessee deploys and undeploys a node but can't read its driver_info or delete it", async () => {
    const shown = (await as("b-admin", "/v1/nodes/nAB")).body as Record<string, unknown>;
    expect(shown.driver_info).toEqual({
      content: "** Redacted - requires baremetal:node:get:driver_info permission. **",
    });
    expect(JSON.stringify(shown)).not.toContain("10.9.9.9");
    await expectStatuses(
      "/v1/nodes/nAB",
      [
        ["b-admin", 403],
        ["b-member", 403],
      ],
      { method: "PATCH", body: [{ op: "replace", path: "/driver_info/ipmi_address", value: "10.0.0.66" }] },
    );
    await expectStatuses("/v1/nodes/nAB", [["b-admin", 403]], { method: "DELETE" });
    // a lessee *member* may not deploy: Ironic wants the lessee's admin (SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN)
    await expectStatuses("/v1/nodes/nAB/states/provision", [["b-member", 403]], {
      method: "PUT",
      body: { target: "active" },
    });
    const patched = await as("b-admin", "/v1/nodes/nAB", {
      method: "PATCH",
      body: [{ op: "add", path: "/instance_info/image_source", value: "http://example.invalid/img.qcow2" }],
    });
    expect(patched.status).toBe(200);
    expect(
      (await as("b-admin", "/v1/nodes/nAB/states/provision", { method: "PUT", body: { target: "active" } }))
        .status,
    ).toBe(202);
    await reach(uuids.nAB!, "active");
    expect(
      (await as("b-admin", "/v1/nodes/nAB/states/provision", { method: "PUT", body: { target: "deleted" } }))
        .status,
    ).toBe(202);
    await reach(uuids.nAB!, "available");
  });

  it("the owner manages its nodes; only a project admin deletes them; readers only read", async () => {
    await expectStatuses(
      "/v1/nodes/nA",
      [
        ["a-reader", 403],
        ["a-member", 200],
        ["sysreader", 403],
      ],
      { method: "PATCH", body: [{ op: "replace", path: "/driver_info/ipmi_address", value: "10.9.9.9" }] },
    );
    await expectStatuses(
      "/v1/nodes/nA/states/power",
      [
        ["a-reader", 403],
        ["sysreader", 403],
      ],
      { method: "PUT", body: { target: "power on" } },
    );
    await expectStatuses("/v1/nodes/nA", [["a-member", 403]], { method: "DELETE" });
    await expectStatuses("/v1/nodes/nX", [["a-admin", 404]], { method: "DELETE" });
    const spare = await enroll("nA-spare", { owner: "A" });
    await expectStatuses(`/v1/nodes/${spare}`, [["a-admin", 204]], { method: "DELETE" });
  });

  it("creating nodes: system admin any, a project admin only for its own project", async () => {
    const body = { driver: "fake-hardware" };
    await expectStatuses("/v1/nodes", [["a-member", 403]], { method: "POST", body });
    await expectStatuses("/v1/nodes", [["a-admin", 403]], { method: "POST", body: { ...body, owner: "B" } });
    const own = await as("a-admin", "/v1/nodes", { method: "POST", body });
    expect(own.status).toBe(201);
    expect((own.body as { owner: string }).owner).toBe("A");
  });

  it("ports follow their node: owner admin creates, others can't see", async () => {
    const body = { node_uuid: uuids.nA, address: "52:54:00:aa:00:01" };
    await expectStatuses("/v1/ports", [["a-member", 403]], { method: "POST", body });
    const created = await as("a-admin", "/v1/ports", { method: "POST", body });
    expect(created.status).toBe(201);
    const port = (created.body as { uuid: string }).uuid;
    await expectStatuses(`/v1/ports/${port}`, [
      ["b-member", 404],
      ["a-reader", 200],
      ["sysreader", 200],
    ]);
    const listed = (await as("b-member", "/v1/ports")).body as { ports: unknown[] };
    expect(listed.ports).toEqual([]);
  });

  it("an allocation by project A never returns project B's node", async () => {
    const first = await as("a-member", "/v1/allocations", {
      method: "POST",
      body: { resource_class: "alloc" },
    });
    expect(first.status).toBe(201);
    const a = first.body as { uuid: string; node_uuid: string; owner: string; state: string };
    expect(a).toMatchObject({ state: "active", node_uuid: uuids["alloc-a"], owner: "A" });
    // B's node is free and matches, but is not A's to take
    const second = await as("a-member", "/v1/allocations", {
      method: "POST",
      body: { resource_class: "alloc" },
    });
    expect((second.body as { state: string; node_uuid: string | null }).node_uuid).toBeNull();
    await expectStatuses("/v1/allocations", [["a-member", 403]], {
      method: "POST",
      body: { resource_class: "alloc", owner: "B" },
    });
    await expectStatuses(`/v1/allocations/${a.uuid}`, [
      ["b-member", 403],
      ["a-reader", 200],
      ["sysreader", 200],
    ]);
    const listed = (await as("b-member", "/v1/allocations")).body as { allocations: unknown[] };
    expect(listed.allocations).toEqual([]);
    await expectStatuses(`/v1/allocations/${a.uuid}`, [["b-member", 403]], { method: "DELETE" });
  });

  it("fleet-wide endpoints: conductors, events and metrics are for system readers", async () => {
    for (const path of ["/v1/conductors", "/metrics"]) {
      await expectStatuses(path, [
        ["a-admin", 403],
        ["sysreader", 200],
      ]);
    }
    await expectStatuses("/v1/drivers", [
      ["a-reader", 200],
      ["nobody", 403],
    ]);
  });
});

describe("the stock clients with http_basic", () => {
  const bm = async (user: User, ...args: string[]) =>
    baremetal(ctx.url, { username: user, password: password(user) }).run(args, { timeoutMs: 60_000 });

  it("baremetal node list shows a project its nodes; a lessee's delete is refused", async () => {
    const stdout = await bm("b-member", "node", "list", "-f", "json");
    const names = (JSON.parse(stdout) as { Name: string }[]).map((n) => n.Name).sort();
    expect(names).toEqual(["alloc-b", "nAB"]);
    await expect(bm("b-admin", "node", "delete", "nAB")).rejects.toThrow(
      "Access was denied to the following resource: baremetal:node:delete",
    );
    await expect(bm("b-member", "node", "show", "nA")).rejects.toThrow("could not be found");
    await expect(
      baremetal(ctx.url, { username: "a-member", password: "wrong" }).run(["node", "list"]),
    ).rejects.toThrow(/401|Incorrect username or password/);
  });

  it("openstacksdk's http_basic sees the same scoping", async () => {
    const script = `
import json, os, sys, openstack
conn = openstack.connection.Connection(auth_type="http_basic",
    auth={"endpoint": sys.argv[1], "username": sys.argv[2], "password": os.environ["SDK_PASSWORD"]},
    baremetal_endpoint_override=sys.argv[1], baremetal_api_version="1.78")
names = sorted(n.name for n in conn.baremetal.nodes())
try:
    conn.baremetal.get_node("nA")
    hidden = False
except openstack.exceptions.NotFoundException:
    hidden = True
print(json.dumps({"names": names, "hidden": hidden}))
`;
    const { stdout } = await run("/usr/bin/python3", ["-c", script, ctx.url, "b-member"], {
      timeout: 60_000,
      env: { ...process.env, SDK_PASSWORD: password("b-member") },
    });
    expect(JSON.parse(stdout)).toEqual({ names: ["alloc-b", "nAB"], hidden: true });
  });
});
