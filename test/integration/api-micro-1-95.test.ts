import fc from "fast-check";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basic, writeUserFiles, type TestUser } from "../helpers/auth.ts";
import { boolSpelling, expectedBool } from "../helpers/bool-spellings.ts";
import { api, faultOf, powerSettled, provisionThrough, startConductor } from "../helpers/conductor.ts";
import { CountingPower, fakeHardwareWith } from "../helpers/counting-power.ts";
import { until } from "../helpers/wait.ts";

/** 1.95, a node's `disable_power_off` (Ironic's MINOR_95_DISABLE_POWER_OFF): the field, its gate, its refusal. */
const USERS: TestUser[] = [
  { name: "sysadmin", password: "pw-sysadmin", role: "admin" },
  { name: "a-admin", password: "pw-a-admin", role: "admin", project: "A" },
];
type User = "sysadmin" | "a-admin";

const dir = mkdtempSync(join(tmpdir(), "anvil-95-"));
const files = writeUserFiles(dir, USERS);
const power = new CountingPower({ delayMs: 0 });
let ctx: Awaited<ReturnType<typeof startConductor>>;
let names = 0;

const call = (path: string, init: { method?: string; body?: unknown; version?: string; user?: User } = {}) =>
  api(`${ctx.url}${path}`, {
    method: init.method,
    body: init.body,
    headers: {
      ...basic(init.user ?? "sysadmin", `pw-${init.user ?? "sysadmin"}`),
      "X-OpenStack-Ironic-API-Version": init.version ?? "1.95",
    },
  });
const create = (body: Record<string, unknown>, version = "1.95") =>
  call("/v1/nodes", {
    method: "POST",
    version,
    body: { driver: "fake-hardware", name: `n95-${names++}`, owner: "A", ...body },
  });
const patch = (node: string, ops: unknown[], options: { version?: string; user?: User } = {}) =>
  call(`/v1/nodes/${node}`, { method: "PATCH", body: ops, ...options });
const setPower = (node: string, target: string) =>
  call(`/v1/nodes/${node}/states/power`, { method: "PUT", body: { target } });
const uuidOf = (r: { body: unknown }) => (r.body as { uuid: string }).uuid;

beforeAll(async () => {
  ctx = await startConductor(
    { fakeDelayMs: 0, auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile } },
    { drivers: fakeHardwareWith(power) },
  );
});
afterAll(async () => {
  await ctx?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("1.95 disable_power_off, the field", () => {
  it("is false on a new node at 1.95 and hidden below it, in the full form and the field list", async () => {
    const node = uuidOf(await create({}));
    expect((await call(`/v1/nodes/${node}`)).body).toMatchObject({ disable_power_off: false });
    const old = await call(`/v1/nodes/${node}`, { version: "1.94" });
    expect(old.status).toBe(200);
    expect(old.body).not.toHaveProperty("disable_power_off");
    const detail = await call(`/v1/nodes/detail`, { version: "1.94" });
    for (const n of (detail.body as { nodes: object[] }).nodes)
      expect(n).not.toHaveProperty("disable_power_off");
    // NOTE: Anvil leaves a field newer than the request out of ?fields= (every field alike); Ironic's 406
    const asked = await call(`/v1/nodes/${node}?fields=uuid,disable_power_off`, { version: "1.94" });
    expect(asked.status).toBe(200);
    expect(asked.body).not.toHaveProperty("disable_power_off");
    const shown = await call(`/v1/nodes?fields=uuid,disable_power_off`);
    const mine = (shown.body as { nodes: { uuid: string }[] }).nodes.find((n) => n.uuid === node);
    expect(mine).toMatchObject({ disable_power_off: false });
  });

  it("is refused on create and PATCH below 1.95 (406), a null create value excepted", async () => {
    const early = await create({ disable_power_off: true }, "1.94");
    expect(early.status).toBe(406);
    expect(faultOf(early.body)).toBe("Request not acceptable.");
    const nulled = await create({ disable_power_off: null }, "1.94");
    expect(nulled.status).toBe(201);
    const node = uuidOf(nulled);
    const patched = await patch(node, [{ op: "replace", path: "/disable_power_off", value: true }], {
      version: "1.94",
    });
    expect(patched.status).toBe(406);
    expect((await call(`/v1/nodes/${node}`)).body).toMatchObject({ disable_power_off: null });
  });

  it("reads any boolean spelling on create as oslo's strict reader does; anything else is a 400", async () => {
    await fc.assert(
      fc.asyncProperty(boolSpelling, async (value) => {
        const r = await create({ disable_power_off: value });
        const want = expectedBool(value);
        if (want === undefined) {
          expect(r.status).toBe(400);
          return;
        }
        expect(r.status).toBe(201);
        expect(r.body).toMatchObject({ disable_power_off: want });
        const stored = await ctx.conductor.store.getNode(uuidOf(r));
        expect(stored?.disable_power_off).toBe(want);
      }),
      { numRuns: 30 },
    );
  });

  it("is set and unset by PATCH: replace takes a boolean spelling, remove stores null as Ironic does", async () => {
    const node = uuidOf(await create({}));
    const on = await patch(node, [{ op: "replace", path: "/disable_power_off", value: "True" }]);
    expect(on.status).toBe(200);
    expect(on.body).toMatchObject({ disable_power_off: true });
    const off = await patch(node, [{ op: "replace", path: "/disable_power_off", value: false }]);
    expect(off.body).toMatchObject({ disable_power_off: false });
    const removed = await patch(node, [{ op: "remove", path: "/disable_power_off" }]);
    expect(removed.status).toBe(200);
    expect(removed.body).toMatchObject({ disable_power_off: null });
    const bad = await patch(node, [{ op: "replace", path: "/disable_power_off", value: "maybe" }]);
    expect(bad.status).toBe(400);
    expect((await ctx.conductor.store.getNode(node))?.disable_power_off).toBeNull();
  });

  it("needs the system admin's baremetal:node:update:disable_power_off; the owner's admin gets 403", async () => {
    const node = uuidOf(await create({}));
    const ops = [{ op: "replace", path: "/disable_power_off", value: true }];
    const owner = await patch(node, ops, { user: "a-admin" });
    expect(owner.status).toBe(403);
    // the same admin may change another field of the node it owns
    const described = await patch(node, [{ op: "replace", path: "/description", value: "rack 1" }], {
      user: "a-admin",
    });
    expect(described.status).toBe(200);
    expect((await patch(node, ops)).status).toBe(200);
  });
});

describe("1.95 disable_power_off, power actions", () => {
  async function manageable(body: Record<string, unknown>): Promise<string> {
    const node = uuidOf(await create(body));
    await provisionThrough({ url: ctx.url, headers: basic("sysadmin", "pw-sysadmin") }, node, [
      ["manage", "manageable"],
    ]);
    return node;
  }

  it("refuses power off and soft power off with Ironic's 409, and no call reaches the driver", async () => {
    const node = await manageable({ disable_power_off: true });
    const before = power.of(node).length;
    for (const target of ["power off", "soft power off"]) {
      const r = await setPower(node, target);
      expect(r.status).toBe(409);
      expect(faultOf(r.body)).toBe(`Failed to set node power state to ${target}.`);
    }
    expect(power.of(node).slice(before)).toEqual([]);
    const shown = (await call(`/v1/nodes/${node}`)).body as Record<string, unknown>;
    expect(shown.target_power_state).toBeNull();
  });

  it("still powers the node on and reboots it", async () => {
    const node = await manageable({ disable_power_off: true });
    const before = power.of(node).length;
    expect((await setPower(node, "power on")).status).toBe(202);
    await until(async () => power.of(node).length === before + 1 || undefined, { what: "power on" });
    await powerSettled({ url: ctx.url, headers: basic("sysadmin", "pw-sysadmin") }, node, "power on");
    expect((await setPower(node, "rebooting")).status).toBe(202);
    await until(async () => power.of(node).length === before + 2 || undefined, { what: "reboot" });
    expect(power.of(node).slice(before)).toEqual(["power on", "reboot"]);
  });

  it("powers the node off once the field is unset again", async () => {
    const node = await manageable({ disable_power_off: true });
    const unset = await patch(node, [{ op: "remove", path: "/disable_power_off" }]);
    expect(unset.status, JSON.stringify(unset.body)).toBe(200);
    const before = power.of(node).length;
    expect((await setPower(node, "power off")).status).toBe(202);
    await until(async () => power.of(node).length > before || undefined, { what: "power off" });
    expect(power.of(node).slice(before)).toEqual(["power off"]);
  });
});
