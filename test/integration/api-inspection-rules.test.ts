import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basic, writeUserFiles, type TestUser } from "../helpers/auth.ts";
import { api, faultOf, startConductor } from "../helpers/conductor.ts";

/** /v1/inspection_rules (Ironic 1.96) over real HTTP: body, texts, versions, policies, generated documents. */
const USERS: TestUser[] = [
  { name: "sysadmin", password: "pw-sysadmin", role: "admin" },
  { name: "sysreader", password: "pw-sysreader", role: "reader" },
  { name: "p-admin", password: "pw-p-admin", role: "admin", project: "P" },
];
type User = "sysadmin" | "sysreader" | "p-admin";
const dir = mkdtempSync(join(tmpdir(), "anvil-rules-api-"));
const files = writeUserFiles(dir, USERS);
let ctx: Awaited<ReturnType<typeof startConductor>>;

const as = (
  user: User,
  path: string,
  init: { method?: string; body?: unknown; raw?: string; version?: string } = {},
) =>
  api(`${ctx.url}${path}`, {
    ...init,
    headers: { ...basic(user, `pw-${user}`), "X-OpenStack-Ironic-API-Version": init.version ?? "1.96" },
  });

const RULE = {
  description: "x86 nodes with 2+ CPUs are gold",
  priority: 50,
  conditions: [
    { op: "eq", args: { values: ["{inventory[cpu][architecture]}", "x86_64"] } },
    { op: "!is-empty", args: { value: "{inventory[interfaces]}" } },
  ],
  actions: [
    { op: "set-attribute", args: { path: "resource_class", value: "gold" } },
    { op: "add-trait", args: { name: "CUSTOM_GOLD" } },
  ],
};

beforeAll(async () => {
  ctx = await startConductor({
    auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile },
  });
});
afterAll(async () => {
  await ctx?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("/v1/inspection_rules", () => {
  it("creates, shows, lists, patches and deletes a rule with Ironic's body", async () => {
    const made = await as("sysadmin", "/v1/inspection_rules", { method: "POST", body: RULE });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const rule = made.body as Record<string, unknown> & { uuid: string };
    expect(made.headers.get("location")).toBe(`${ctx.url}/v1/inspection_rules/${rule.uuid}`);
    expect(Object.keys(rule).sort()).toEqual(
      [
        ...["actions", "conditions", "created_at", "description", "links", "phase", "priority"],
        ...["sensitive", "updated_at", "uuid"],
      ].sort(),
    );
    expect(rule).toMatchObject({ ...RULE, phase: "main", sensitive: false, updated_at: null });

    const shown = await as("sysreader", `/v1/inspection_rules/${rule.uuid}`);
    expect(shown.body).toEqual(rule);
    const listed = await as("sysreader", "/v1/inspection_rules");
    const item = (listed.body as { inspection_rules: Record<string, unknown>[] }).inspection_rules.find(
      (r) => r.uuid === rule.uuid,
    );
    expect(Object.keys(item!).sort()).toEqual(["description", "links", "phase", "priority", "uuid"]);
    const detail = await as("sysreader", "/v1/inspection_rules/detail");
    expect((detail.body as { inspection_rules: unknown[] }).inspection_rules).toContainEqual(rule);
    const wrongPhase = await as("sysreader", "/v1/inspection_rules?phase=other");
    expect((wrongPhase.body as { inspection_rules: unknown[] }).inspection_rules).toEqual([]);

    const patched = await as("sysadmin", `/v1/inspection_rules/${rule.uuid}`, {
      method: "PATCH",
      body: [
        { op: "replace", path: "/priority", value: 70 },
        { op: "replace", path: "/actions/1/args/name", value: "CUSTOM_PLATINUM" },
      ],
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body).toMatchObject({ priority: 70, actions: [RULE.actions[0], { op: "add-trait" }] });
    expect((patched.body as { actions: { args: unknown }[] }).actions[1]!.args).toEqual({
      name: "CUSTOM_PLATINUM",
    });

    expect((await as("sysadmin", `/v1/inspection_rules/${rule.uuid}`, { method: "DELETE" })).status).toBe(
      204,
    );
    const gone = await as("sysadmin", `/v1/inspection_rules/${rule.uuid}`);
    expect(gone.status).toBe(404);
    expect(faultOf(gone.body)).toBe(`Inspection rule ${rule.uuid} could not be found.`);
  });

  it("hides a sensitive rule's conditions and actions and never unsets the flag", async () => {
    const made = await as("sysadmin", "/v1/inspection_rules", {
      method: "POST",
      body: { ...RULE, sensitive: true },
    });
    const uuid = (made.body as { uuid: string }).uuid;
    expect(made.body).toMatchObject({ sensitive: true, conditions: null, actions: null });
    const unset = await as("sysadmin", `/v1/inspection_rules/${uuid}`, {
      method: "PATCH",
      body: [{ op: "replace", path: "/sensitive", value: false }],
    });
    expect(unset.status).toBe(400);
    expect(faultOf(unset.body)).toContain("Inspection rules cannot have the sensitive flag unset.");
  });

  it("answers Ironic's texts for documents validate_rule refuses", async () => {
    const cases: [unknown, string][] = [
      [{}, "Validation failed for inspection rule: 'actions' is a required property"],
      [{ actions: [] }, "Validation failed for inspection rule: [] is too short"],
      [{ ...RULE, colour: 1 }, "Additional properties are not allowed ('colour' was unexpected)"],
      [{ ...RULE, phase: "late" }, "Invalid phase: late. Valid phases are: main"],
      [{ ...RULE, priority: 10000 }, "Priority must be between 0 and 9999 for user-defined rules."],
      [
        { actions: [{ op: "add-trait", args: {} }] },
        "Invalid parameters for action operator add-trait: missing required argument(s): name",
      ],
      [
        { actions: [{ op: "fail", args: { msg: "x" } }], conditions: [{ op: "eq", args: { value: 1 } }] },
        "Invalid parameters for condition operator eq: missing required argument(s): values; unexpected argument(s): value",
      ],
      [{ actions: [{ op: "reboot", args: {} }] }, "'reboot' is not one of ['fail', 'log'"],
    ];
    for (const [body, text] of cases) {
      const r = await as("sysadmin", "/v1/inspection_rules", { method: "POST", body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(faultOf(r.body)).toContain(text);
    }
    const first = await as("sysadmin", "/v1/inspection_rules", {
      method: "POST",
      body: { ...RULE, uuid: "4b9a3f52-8a3e-4f55-9e0f-5ad1f2ad3c11" },
    });
    expect(first.status).toBe(201);
    const again = await as("sysadmin", "/v1/inspection_rules", {
      method: "POST",
      body: { ...RULE, uuid: "4b9a3f52-8a3e-4f55-9e0f-5ad1f2ad3c11" },
    });
    expect(again.status).toBe(409);
  });

  it("is 404 to reads and 405 to writes below 1.96", async () => {
    const read = await as("sysadmin", "/v1/inspection_rules", { version: "1.95" });
    expect(read.status).toBe(404);
    expect(faultOf(read.body)).toBe("The API version does not allow inspection rules");
    const write = await as("sysadmin", "/v1/inspection_rules", {
      method: "POST",
      body: RULE,
      version: "1.95",
    });
    expect(write.status).toBe(405);
  });

  it("keeps to Ironic's policies: system readers read, system admins write, projects neither", async () => {
    expect((await as("sysreader", "/v1/inspection_rules")).status).toBe(200);
    expect((await as("sysreader", "/v1/inspection_rules", { method: "POST", body: RULE })).status).toBe(403);
    expect((await as("p-admin", "/v1/inspection_rules")).status).toBe(403);
    expect((await as("p-admin", "/v1/inspection_rules", { method: "POST", body: RULE })).status).toBe(403);
  });

  it("answers a generated rule document with 201 or a 400 envelope, never a 500 (generated)", async () => {
    const op = fc.oneof(
      fc.constantFrom("eq", "!eq", "gt", "is-empty", "matches", "add-trait", "set-attribute", "fail", "!!eq"),
      fc.string({ maxLength: 10 }),
    );
    const args = fc.oneof(
      fc.dictionary(fc.constantFrom("values", "value", "name", "path", "msg", "regex", "x"), fc.jsonValue(), {
        maxKeys: 3,
      }),
      fc.array(fc.jsonValue(), { maxLength: 3 }),
      fc.jsonValue(),
    );
    const item = fc.record(
      { op, args, loop: fc.jsonValue(), multiple: fc.string({ maxLength: 5 }) },
      { requiredKeys: ["op"] },
    );
    const doc = fc.oneof(
      fc.record(
        {
          actions: fc.array(item, { maxLength: 3 }),
          conditions: fc.array(item, { maxLength: 3 }),
          priority: fc.oneof(fc.integer(), fc.double(), fc.string()),
          phase: fc.oneof(fc.constant("main"), fc.string({ maxLength: 20 })),
          sensitive: fc.jsonValue(),
          uuid: fc.oneof(fc.uuid(), fc.string({ maxLength: 40 })),
          description: fc.oneof(fc.string({ maxLength: 300 }), fc.constant(null)),
        },
        { requiredKeys: [] },
      ),
      fc.jsonValue(),
    );
    await fc.assert(
      fc.asyncProperty(doc, async (body) => {
        const r = await as("sysadmin", "/v1/inspection_rules", { method: "POST", body });
        expect([201, 400, 409], JSON.stringify(r.body)).toContain(r.status);
        if (r.status !== 201) expect(faultOf(r.body).length).toBeGreaterThan(0);
      }),
      { numRuns: 150 },
    );
  });
});
