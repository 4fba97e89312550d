import fc from "fast-check";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basic, writeUserFiles, type TestUser } from "../helpers/auth.ts";
import { boolSpelling, expectedBool } from "../helpers/bool-spellings.ts";
import { api, faultOf, startConductor } from "../helpers/conductor.ts";

const USERS: TestUser[] = [
  { name: "sysadmin", password: "pw-sysadmin", role: "admin" },
  { name: "a-member", password: "pw-a-member", role: "member", project: "A" },
  { name: "a-admin", password: "pw-a-admin", role: "admin", project: "A" },
  { name: "b-member", password: "pw-b-member", role: "member", project: "B" },
  { name: "b-admin", password: "pw-b-admin", role: "admin", project: "B" },
];
type User = "sysadmin" | "a-member" | "a-admin" | "b-member" | "b-admin";

const dir = mkdtempSync(join(tmpdir(), "anvil-bool-"));
const files = writeUserFiles(dir, USERS);
let ctx: Awaited<ReturnType<typeof startConductor>>;
let node = "";
let port = "";
const RUNS = 40;

const as = (user: User, path: string, init: { method?: string; body?: unknown } = {}) =>
  api(`${ctx.url}${path}`, { ...init, headers: basic(user, `pw-${user}`) });
const patch = (user: User, path: string, change: { field: string; value: unknown }) =>
  as(user, path, {
    method: "PATCH",
    body: [{ op: "replace", path: `/${change.field}`, value: change.value }],
  });

beforeAll(async () => {
  ctx = await startConductor({
    auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile },
  });
  const created = await as("sysadmin", "/v1/nodes", {
    method: "POST",
    body: { driver: "fake-hardware", name: "shared-node", owner: "A", lessee: "B", automated_clean: true },
  });
  node = (created.body as { uuid: string }).uuid;
  const p = await as("sysadmin", "/v1/ports", {
    method: "POST",
    body: { address: "52:54:00:aa:bb:01", node_uuid: node },
  });
  port = (p.body as { uuid: string }).uuid;
});
afterAll(async () => {
  await ctx.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("every API boolean is read by one strict reader", () => {
  it.each(["maintenance", "protected", "retired", "automated_clean"])(
    "node %s: stored as the reader answers, else 400 and unchanged",
    async (field) => {
      await fc.assert(
        fc.asyncProperty(boolSpelling, async (value) => {
          const before = ((await as("sysadmin", `/v1/nodes/${node}`)).body as Record<string, unknown>)[field];
          const r = await patch("sysadmin", `/v1/nodes/${node}`, { field, value });
          const after = ((await as("sysadmin", `/v1/nodes/${node}`)).body as Record<string, unknown>)[field];
          const want = expectedBool(value);
          if (want === undefined) {
            expect(r.status).toBe(400);
            // a NUL is refused at the door, before any field's reader (api-unstorable-text)
            expect(faultOf(r.body)).toContain(
              typeof value === "string" && value.includes("\u0000")
                ? "holds a NUL character"
                : `Invalid ${field}: Unrecognized value`,
            );
            expect(after).toBe(before);
          } else {
            expect(r.status).toBe(200);
            expect(after).toBe(want);
          }
        }),
        { numRuns: RUNS },
      );
      await patch("sysadmin", `/v1/nodes/${node}`, { field, value: field === "automated_clean" });
    },
  );

  it.each(["pxe_enabled", "is_smartnic"])(
    "port %s: stored as the reader answers, else 400",
    async (field) => {
      await fc.assert(
        fc.asyncProperty(boolSpelling, async (value) => {
          const before = ((await as("sysadmin", `/v1/ports/${port}`)).body as Record<string, unknown>)[field];
          const r = await patch("sysadmin", `/v1/ports/${port}`, { field, value });
          const after = ((await as("sysadmin", `/v1/ports/${port}`)).body as Record<string, unknown>)[field];
          const want = expectedBool(value);
          expect(r.status).toBe(want === undefined ? 400 : 200);
          expect(after).toBe(want ?? before);
        }),
        { numRuns: RUNS },
      );
    },
  );

  it.each(["maintenance", "associated", "retired", "detail"])(
    "query %s: 400 for what the reader refuses, else filtered by its answer",
    async (key) => {
      await fc.assert(
        fc.asyncProperty(boolSpelling, async (value) => {
          const text = String(value);
          const r = await as(
            "sysadmin",
            `/v1/nodes?${key}=${encodeURIComponent(text)}&fields=uuid,maintenance`,
          );
          const want = expectedBool(text);
          expect(r.status).toBe(want === undefined ? 400 : 200);
          if (key === "maintenance" && want !== undefined) {
            for (const n of (r.body as { nodes: { maintenance: boolean }[] }).nodes)
              expect(n.maintenance).toBe(want);
          }
        }),
        { numRuns: RUNS },
      );
    },
  );

  it("a project or lessee member never stores automated_clean false, whatever the spelling", async () => {
    await patch("sysadmin", `/v1/nodes/${node}`, { field: "automated_clean", value: true });
    await fc.assert(
      fc.asyncProperty(fc.constantFrom<User>("a-member", "b-member"), boolSpelling, async (user, value) => {
        const r = await as(user, `/v1/nodes/${node}`, {
          method: "PATCH",
          body: [
            { op: "replace", path: "/automated_clean", value },
            { op: "replace", path: "/description", value: "x" },
          ],
        });
        const stored = ((await as("sysadmin", `/v1/nodes/${node}`)).body as { automated_clean: unknown })
          .automated_clean;
        expect(stored).toBe(true);
        const want = expectedBool(value);
        expect(r.status).toBe(want === undefined ? 400 : want ? 200 : 403);
        if (want === false) expect(faultOf(r.body)).toContain("baremetal:node:disable_cleaning");
      }),
      { numRuns: 60 },
    );
  });
});
