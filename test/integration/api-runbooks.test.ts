import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basic, writeUserFiles, type TestUser } from "../helpers/auth.ts";
import { api, faultOf, startConductor, waitForState } from "../helpers/conductor.ts";

/**
 * 1.92 runbooks (Ironic's MINOR_92_RUNBOOKS): the resource's CRUD, texts and policies (system and project
 * scoped, owner and public), and manual cleaning and servicing by runbook on fake-hardware.
 */
const USERS: TestUser[] = [
  { name: "sysadmin", password: "pw-sysadmin", role: "admin" },
  { name: "sysreader", password: "pw-sysreader", role: "reader" },
  { name: "a-admin", password: "pw-a-admin", role: "admin", project: "A" },
  { name: "a-member", password: "pw-a-member", role: "member", project: "A" },
  { name: "a-reader", password: "pw-a-reader", role: "reader", project: "A" },
  { name: "b-admin", password: "pw-b-admin", role: "admin", project: "B" },
];
type User = "sysadmin" | "sysreader" | "a-admin" | "a-member" | "a-reader" | "b-admin";

const dir = mkdtempSync(join(tmpdir(), "anvil-runbooks-"));
const files = writeUserFiles(dir, USERS);
let ctx: Awaited<ReturnType<typeof startConductor>>;

const headers = (user: User, version = "1.92") => ({
  ...basic(user, `pw-${user}`),
  "X-OpenStack-Ironic-API-Version": version,
});
const as = (user: User, path: string, init: { method?: string; body?: unknown; version?: string } = {}) =>
  api(`${ctx.url}${path}`, { method: init.method, body: init.body, headers: headers(user, init.version) });

const LOG = { interface: "vendor", step: "log_passthrough", args: {}, order: 0 };
let serial = 0;
const uniqueName = () => `CUSTOM_RB_${++serial}`;

async function create(user: User, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const r = await as(user, "/v1/runbooks", { method: "POST", body });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body as Record<string, unknown>;
}

beforeAll(async () => {
  ctx = await startConductor({
    fakeDelayMs: 0,
    auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile },
  });
});
afterAll(async () => {
  await ctx?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("1.92 runbooks: the resource", () => {
  it("is 404 to read and 405 to write below 1.92, with Ironic's text, and the root links it at 1.92", async () => {
    const read = await as("sysadmin", "/v1/runbooks", { version: "1.91" });
    expect(read.status).toBe(404);
    expect(faultOf(read.body)).toBe("The API version does not allow runbooks");
    const write = await as("sysadmin", "/v1/runbooks", {
      method: "POST",
      version: "1.91",
      body: { name: uniqueName(), steps: [LOG] },
    });
    expect(write.status).toBe(405);
    expect((await as("sysadmin", "/v1", { version: "1.91" })).body).not.toHaveProperty("runbooks");
    expect((await as("sysadmin", "/v1")).body).toHaveProperty("runbooks");
  });

  it("creates, shows by uuid and name, lists, patches and deletes", async () => {
    const name = uniqueName();
    const made = await create("sysadmin", {
      name,
      steps: [{ interface: "raid", step: "delete_configuration", order: "1" }],
      extra: { k: "v" },
    });
    expect(made).toMatchObject({
      name,
      owner: null,
      public: false,
      disable_ramdisk: false,
      extra: { k: "v" },
      steps: [{ interface: "raid", step: "delete_configuration", args: {}, order: 1 }],
    });
    const uuid = String(made.uuid);
    expect((await as("sysadmin", `/v1/runbooks/${name}`)).body).toMatchObject({ uuid });
    const listed = (await as("sysadmin", "/v1/runbooks")).body as { runbooks: Record<string, unknown>[] };
    const mine = listed.runbooks.find((r) => r.uuid === uuid);
    expect(Object.keys(mine ?? {}).sort()).toEqual(["links", "name", "uuid"]);
    const patched = await as("sysadmin", `/v1/runbooks/${uuid}`, {
      method: "PATCH",
      body: [
        { op: "replace", path: "/extra/k", value: "w" },
        { op: "replace", path: "/disable_ramdisk", value: true },
      ],
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body).toMatchObject({ extra: { k: "w" }, disable_ramdisk: true });
    expect((await as("sysadmin", `/v1/runbooks/${uuid}`, { method: "DELETE" })).status).toBe(204);
    const gone = await as("sysadmin", `/v1/runbooks/${uuid}`);
    expect(gone.status).toBe(404);
    expect(faultOf(gone.body)).toBe(`Runbook ${uuid} could not be found.`);
  });

  it("answers Ironic's texts for bad bodies and a 409 for a taken name", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [
        { name: "lower", steps: [LOG] },
        "Schema error for runbook: 'lower' is not valid under any of the given schemas. Possible root cause: 'lower' does not match '^CUSTOM_[A-Z0-9_]+$'",
      ],
      [{ name: uniqueName(), steps: [] }, "Schema error for runbook: [] is too short"],
      [{ name: uniqueName(), steps: [LOG], uuid: "nope" }, "Expected UUID for uuid: nope"],
      [{ name: uniqueName(), steps: [LOG, { ...LOG, order: 1 }] }, "Duplicate deploy steps."],
    ];
    for (const [body, text] of cases) {
      const r = await as("sysadmin", "/v1/runbooks", { method: "POST", body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(faultOf(r.body)).toContain(text);
    }
    const name = uniqueName();
    await create("sysadmin", { name, steps: [LOG] });
    const again = await as("sysadmin", "/v1/runbooks", { method: "POST", body: { name, steps: [LOG] } });
    expect(again.status).toBe(409);
    expect(faultOf(again.body)).toBe(`A runbook with name ${name} already exists.`);
  });

  it("masks secrets in step arguments and keeps them when a client sends the mask back", async () => {
    const name = uniqueName();
    const made = await create("sysadmin", {
      name,
      steps: [{ interface: "vendor", step: "log_passthrough", args: { password: "s3cret" }, order: 0 }],
    });
    expect(JSON.stringify(made)).not.toContain("s3cret");
    const steps = made.steps as Record<string, unknown>[];
    await as("sysadmin", `/v1/runbooks/${name}`, {
      method: "PATCH",
      body: [{ op: "replace", path: "/steps", value: steps }],
    });
    const stored = await ctx.conductor.store.getRunbook(name);
    expect(stored?.steps[0]?.args).toEqual({ password: "s3cret" });
  });

  it("never answers 5xx to generated bodies: 201, 400 or 409 only", async () => {
    const step = fc.record(
      {
        interface: fc.constantFrom("deploy", "raid", "vendor", "bios", "nope", 3),
        step: fc.oneof(fc.constantFrom("log_passthrough", "x"), fc.string({ maxLength: 8 })),
        args: fc.oneof(fc.constant({}), fc.dictionary(fc.string({ maxLength: 4 }), fc.jsonValue())),
        order: fc.oneof(fc.nat(2000), fc.constantFrom("1", "-1", "a"), fc.constant(null)),
      },
      { requiredKeys: ["interface", "step"] },
    );
    const body = fc.record(
      {
        name: fc.oneof(
          fc.constantFrom("CUSTOM_FC", "CUSTOM_FC_2", "HW_CPU_X86_AVX"),
          fc.string({ maxLength: 10 }),
        ),
        steps: fc.oneof(fc.array(step, { maxLength: 3 }), fc.jsonValue()),
        uuid: fc.oneof(fc.uuid(), fc.string({ maxLength: 8 }), fc.constant(null)),
        disable_ramdisk: fc.oneof(fc.boolean(), fc.constant(null), fc.string({ maxLength: 3 })),
        public: fc.oneof(fc.boolean(), fc.constant(null)),
        owner: fc.oneof(fc.string({ maxLength: 5 }), fc.constant(null)),
        extra: fc.oneof(fc.dictionary(fc.string({ maxLength: 4 }), fc.jsonValue()), fc.jsonValue()),
        surplus: fc.jsonValue(),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(body, fc.constantFrom<User>("sysadmin", "a-admin"), async (b, user) => {
        const r = await as(user, "/v1/runbooks", { method: "POST", body: b });
        expect([201, 400, 409], JSON.stringify(b)).toContain(r.status);
        if (r.status === 201) {
          const uuid = String((r.body as { uuid: string }).uuid);
          expect((await as("sysadmin", `/v1/runbooks/${uuid}`, { method: "DELETE" })).status).toBe(204);
        }
      }),
      { numRuns: 60 },
    );
  });
});

describe("1.92 runbooks: generated patches", () => {
  it("never answers 5xx to a generated patch: 200, 400 or 409, and the runbook stays valid", async () => {
    const name = uniqueName();
    const taken = uniqueName();
    await create("sysadmin", { name: taken, steps: [LOG] });
    const uuid = String((await create("sysadmin", { name, steps: [LOG] })).uuid);
    const op = fc.record({
      op: fc.constantFrom("add", "replace", "remove"),
      path: fc.constantFrom(
        "/name",
        "/steps",
        "/steps/0/order",
        "/steps/0/args/x",
        "/extra/k",
        "/extra",
        "/public",
        "/owner",
        "/disable_ramdisk",
        "/uuid",
        "/nope",
      ),
      value: fc.oneof(
        fc.jsonValue(),
        fc.constantFrom(taken, "CUSTOM_PATCHED", true, false, null, [LOG], [{ ...LOG, order: "7" }]),
      ),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 3 }), async (patch) => {
        const r = await as("sysadmin", `/v1/runbooks/${uuid}`, { method: "PATCH", body: patch });
        expect([200, 400, 409], JSON.stringify(patch)).toContain(r.status);
        const shown = await as("sysadmin", `/v1/runbooks/${uuid}`);
        expect(shown.status).toBe(200);
        expect((shown.body as { steps: unknown[] }).steps.length).toBeGreaterThan(0);
      }),
      { numRuns: 60 },
    );
  });
});

describe("1.92 runbooks: policies", () => {
  let system = "";
  let publicOne = "";
  let ownedByA = "";
  beforeAll(async () => {
    system = String((await create("sysadmin", { name: uniqueName(), steps: [LOG] })).uuid);
    publicOne = String((await create("sysadmin", { name: uniqueName(), steps: [LOG], public: true })).uuid);
    ownedByA = String((await create("a-admin", { name: uniqueName(), steps: [LOG] })).uuid);
  });

  it("a project admin's runbook is owned by its project; another owner or public is refused", async () => {
    expect((await as("sysadmin", `/v1/runbooks/${ownedByA}`)).body).toMatchObject({ owner: "A" });
    const other = await as("a-admin", "/v1/runbooks", {
      method: "POST",
      body: { name: uniqueName(), steps: [LOG], owner: "B" },
    });
    expect(other.status).toBe(400);
    expect(faultOf(other.body)).toBe(
      "Cannot create a runbook as a project scoped admin with an owner other than your own project.",
    );
    const pub = await as("a-admin", "/v1/runbooks", {
      method: "POST",
      body: { name: uniqueName(), steps: [LOG], public: true },
    });
    expect(pub.status).toBe(400);
    expect(faultOf(pub.body)).toBe("Cannot create a public runbook as a project scoped admin.");
    // baremetal:runbook:create needs a system member or a project's manager (admin here)
    const member = await as("a-member", "/v1/runbooks", {
      method: "POST",
      body: { name: uniqueName(), steps: [LOG] },
    });
    expect(member.status).toBe(403);
    expect((await as("sysreader", "/v1/runbooks", { method: "POST", body: {} })).status).toBe(403);
  });

  it("a project lists its own and the public runbooks; the system lists all", async () => {
    const listOf = async (user: User) =>
      ((await as(user, "/v1/runbooks")).body as { runbooks: { uuid: string }[] }).runbooks.map((r) => r.uuid);
    const a = await listOf("a-reader");
    expect(a).toEqual(expect.arrayContaining([publicOne, ownedByA]));
    expect(a).not.toContain(system);
    const b = await listOf("b-admin");
    expect(b).toContain(publicOne);
    expect(b).not.toContain(ownedByA);
    expect(await listOf("sysreader")).toEqual(expect.arrayContaining([system, publicOne, ownedByA]));
  });

  it("reads: owner's readers and the system; public ones to anyone; others 403, missing 404", async () => {
    const got: [string, User, number][] = [];
    for (const [uuid, user] of [
      [ownedByA, "a-reader"],
      [ownedByA, "b-admin"],
      [ownedByA, "sysreader"],
      [publicOne, "b-admin"],
      [system, "a-admin"],
    ] as const)
      got.push([uuid, user, (await as(user, `/v1/runbooks/${uuid}`)).status]);
    expect(got.map(([, u, s]) => `${u}:${s}`)).toEqual([
      "a-reader:200",
      "b-admin:403",
      "sysreader:200",
      "b-admin:200",
      "a-admin:403",
    ]);
    expect((await as("b-admin", "/v1/runbooks/CUSTOM_NO_SUCH")).status).toBe(404);
  });

  it("updates and deletes: the owner's admin or a system member; owner and public only the system", async () => {
    const extra = [{ op: "add", path: "/extra/x", value: 1 }];
    expect((await as("a-member", `/v1/runbooks/${ownedByA}`, { method: "PATCH", body: extra })).status).toBe(
      403,
    );
    expect((await as("b-admin", `/v1/runbooks/${ownedByA}`, { method: "PATCH", body: extra })).status).toBe(
      403,
    );
    expect((await as("a-admin", `/v1/runbooks/${ownedByA}`, { method: "PATCH", body: extra })).status).toBe(
      200,
    );
    const toPublic = [{ op: "replace", path: "/public", value: true }];
    const denied = await as("a-admin", `/v1/runbooks/${ownedByA}`, { method: "PATCH", body: toPublic });
    expect(denied.status).toBe(403);
    expect(faultOf(denied.body)).toBe(
      "Access was denied to the following resource: baremetal:runbook:update:public",
    );
    const both = await as("sysadmin", `/v1/runbooks/${ownedByA}`, {
      method: "PATCH",
      body: [...toPublic, { op: "replace", path: "/owner", value: "A" }],
    });
    expect(both.status).toBe(400);
    expect(faultOf(both.body)).toContain("There cannot be an owner for a public runbook");
    const made = await as("sysadmin", `/v1/runbooks/${ownedByA}`, { method: "PATCH", body: toPublic });
    expect(made.body).toMatchObject({ public: true, owner: null });
    const victim = String((await create("a-admin", { name: uniqueName(), steps: [LOG] })).uuid);
    expect((await as("b-admin", `/v1/runbooks/${victim}`, { method: "DELETE" })).status).toBe(403);
    expect((await as("a-admin", `/v1/runbooks/${victim}`, { method: "DELETE" })).status).toBe(204);
  });
});

describe("1.92 provisioning by runbook on fake-hardware", () => {
  const provision = (
    uuid: string,
    body: Record<string, unknown>,
    who: { user?: User; version?: string } = {},
  ) =>
    as(who.user ?? "sysadmin", `/v1/nodes/${uuid}/states/provision`, {
      method: "PUT",
      body,
      version: who.version,
    });
  const target = { url: "", headers: {} as Record<string, string> };

  async function node(name: string, traits: string[], owner?: string): Promise<string> {
    const made = await as("sysadmin", "/v1/nodes", {
      method: "POST",
      body: { driver: "fake-hardware", name, ...(owner ? { owner } : {}) },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const uuid = (made.body as { uuid: string }).uuid;
    const t = await as("sysadmin", `/v1/nodes/${uuid}/traits`, { method: "PUT", body: { traits } });
    expect(t.status).toBe(204);
    Object.assign(target, { url: ctx.url, headers: headers("sysadmin") });
    expect((await provision(uuid, { target: "manage" })).status).toBe(202);
    await waitForState(target, uuid, "manageable");
    return uuid;
  }

  it("a manual clean by runbook (name or uuid) runs the runbook's steps in order", async () => {
    const name = uniqueName();
    const runbook = await create("sysadmin", {
      name,
      steps: [
        // listed out of order: order 0 (delete) runs before order 1 (create), so the disks stay made
        { interface: "raid", step: "create_configuration", order: 1 },
        { interface: "raid", step: "delete_configuration", order: 0 },
      ],
    });
    const uuid = await node("rb-clean", [name]);
    const raid = { logical_disks: [{ size_gb: 10, raid_level: "1", is_root_volume: true }] };
    expect(
      (await as("sysadmin", `/v1/nodes/${uuid}/states/raid`, { method: "PUT", body: raid })).status,
    ).toBe(204);
    const r = await provision(uuid, { target: "clean", runbook: name });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    const done = await waitForState(target, uuid, "manageable");
    expect(done.last_error).toBeNull();
    // create_configuration ran last: the node's raid_config holds the target's disk
    expect((done.raid_config as { logical_disks: unknown[] }).logical_disks).toHaveLength(1);
    // by uuid too, with a runbook whose only step empties it again
    await as("sysadmin", `/v1/runbooks/${String(runbook.uuid)}`, {
      method: "PATCH",
      body: [
        {
          op: "replace",
          path: "/steps",
          value: [{ interface: "raid", step: "delete_configuration", order: 0 }],
        },
      ],
    });
    expect((await provision(uuid, { target: "clean", runbook: String(runbook.uuid) })).status).toBe(202);
    expect((await waitForState(target, uuid, "manageable")).raid_config).toEqual({});
  });

  it("a service by runbook runs its steps: a hold step holds, unhold finishes", async () => {
    const name = uniqueName();
    await create("sysadmin", {
      name,
      steps: [
        { interface: "vendor", step: "log_passthrough", order: 1 },
        { interface: "deploy", step: "hold", order: 0 },
      ],
    });
    const uuid = await node("rb-service", [name]);
    expect((await provision(uuid, { target: "adopt" })).status).toBe(202);
    await waitForState(target, uuid, "active");
    expect((await provision(uuid, { target: "service", runbook: name })).status).toBe(202);
    const held = await waitForState(target, uuid, "service hold");
    expect(held.service_step).toMatchObject({ interface: "deploy", step: "hold" });
    expect((await provision(uuid, { target: "unhold" })).status).toBe(202);
    const done = await waitForState(target, uuid, "active");
    expect(done).toMatchObject({ last_error: null, service_step: {} });
  });

  it("refuses with Ironic's texts: old version, unknown, unapproved, mixed, wrong verb, forbidden", async () => {
    const name = uniqueName();
    await create("sysadmin", {
      name,
      steps: [{ interface: "raid", step: "delete_configuration", order: 0 }],
    });
    const owned = String((await create("a-admin", { name: uniqueName(), steps: [LOG] })).uuid);
    const uuid = await node("rb-refusals", [name], "A");
    const cases: [Record<string, unknown>, number, string, User?, string?][] = [
      [{ target: "clean", runbook: name }, 406, "Request not acceptable.", "sysadmin", "1.91"],
      [{ target: "clean", runbook: "CUSTOM_NONE" }, 404, "Runbook CUSTOM_NONE could not be found."],
      [
        { target: "clean", runbook: owned },
        400,
        `This runbook has not been approved for use on this node ${uuid}. Please ask an administrator to add it to your node traits.`,
      ],
      [
        { target: "clean", runbook: name, clean_steps: [LOG] },
        400,
        'Please provide either "clean_steps" or a runbook, but not both.',
      ],
      [
        { target: "provide", runbook: name },
        400,
        `"runbooks" is only valid when setting target provision state to any of ['clean', 'service']`,
      ],
      [
        { target: "clean", runbook: name },
        403,
        "Access was denied to the following resource: baremetal:runbook:use",
        "a-member",
      ],
    ];
    for (const [body, status, text, user, version] of cases) {
      const r = await provision(uuid, body, { user, version });
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect(faultOf(r.body)).toBe(text);
    }
    expect((await as("sysadmin", `/v1/nodes/${uuid}`)).body).toMatchObject({ provision_state: "manageable" });
  });
});
