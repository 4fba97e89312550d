import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basic, writeUserFiles } from "../helpers/auth.ts";
import { api, provisionThrough, released, startConductor, waitForState } from "../helpers/conductor.ts";
import { baremetal } from "../../scripts/lab/baremetal.ts";
import { recordingLogger } from "../helpers/log.ts";
import { until } from "../helpers/wait.ts";

const dir = mkdtempSync(join(tmpdir(), "anvil-history-"));
const files = writeUserFiles(dir, [
  { name: "ops", password: "ops-pass", role: "admin" },
  { name: "tenant", password: "tenant-pass", role: "admin", project: "B" },
]);
const logLines: string[] = [];
let ctx: Awaited<ReturnType<typeof startConductor>>;
let uuid = "";
const ops = basic("ops", "ops-pass");
const as = (path: string, init: { method?: string; body?: unknown; version?: string } = {}) =>
  api(`${ctx.url}${path}`, {
    ...init,
    headers: { ...ops, "X-OpenStack-Ironic-API-Version": init.version ?? "1.78" },
  });

async function reach(state: string): Promise<void> {
  await waitForState({ url: ctx.url, headers: ops }, uuid, state);
}

beforeAll(async () => {
  ctx = await startConductor(
    { auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile } },
    { logger: recordingLogger(logLines) },
  );
  const created = await as("/v1/nodes", {
    method: "POST",
    body: {
      driver: "fake-hardware",
      name: "h1",
      lessee: "B",
      driver_info: { ipmi_password: "CREATE-SECRET" },
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  uuid = (created.body as { uuid: string }).uuid;
  const patched = await as(`/v1/nodes/h1`, {
    method: "PATCH",
    body: [
      { op: "add", path: "/driver_info/ipmi_password", value: "hunter2-secret" },
      { op: "replace", path: "/name", value: "h1-renamed" },
    ],
  });
  expect(patched.status, JSON.stringify(patched.body)).toBe(200);
  await provisionThrough({ url: ctx.url, headers: ops }, uuid, [
    ["manage", "manageable"],
    ["provide", "available"],
  ]);
  await released({ url: ctx.url, headers: ops }, uuid);
  const deploy = await as(`/v1/nodes/${uuid}/states/provision`, {
    method: "PUT",
    body: { target: "active", configdrive: { meta_data: {}, user_data: "CONFIGDRIVE-SECRET" } },
  });
  expect(deploy.status, JSON.stringify(deploy.body)).toBe(202);
  await reach("active");
  // the 1.113 test's power change needs the lock the deploy held
  await released({ url: ctx.url, headers: ops }, uuid);
});
afterAll(async () => {
  await ctx.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("node history (API 1.78)", () => {
  it("lists every change in order with Ironic's list fields", async () => {
    const { status, body } = await as(`/v1/nodes/${uuid}/history`);
    expect(status).toBe(200);
    const history = (body as { history: Record<string, unknown>[] }).history;
    expect(Object.keys(history[0]!).sort()).toEqual(["created_at", "event", "links", "severity", "uuid"]);
    const events = history.map((h) => String(h.event));
    expect(events[0]).toBe("Node created by ops");
    expect(events[1]).toBe("Updated by ops: /driver_info/ipmi_password, /name");
    expect(events).toContain('Provision action "active" requested by ops');
    expect(events).toContain('Provision state changed from "deploying" to "active" (done)');
    // a request's entry comes before the transitions it caused
    expect(events.indexOf('Provision action "manage" requested by ops')).toBeLessThan(
      events.indexOf('Provision state changed from "enroll" to "verifying" (manage)'),
    );
  });

  it("detail adds event_type, conductor and user; one event adds where it came from", async () => {
    const detail = (await as(`/v1/nodes/${uuid}/history/detail`)).body as {
      history: Record<string, unknown>[];
    };
    const deploy = detail.history.find((h) => String(h.event).includes('"active" requested'))!;
    expect(deploy).toMatchObject({ event_type: "provisioning", conductor: ctx.config.name, user: "ops" });
    const transition = detail.history.find((h) => String(h.event).includes('to "active"'))!;
    expect(transition.user).toBe("ops"); // the background work is the requester's
    const one = await as(`/v1/nodes/${uuid}/history/${String(deploy.uuid)}`);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ uuid: deploy.uuid, remote_address: "127.0.0.1", severity: "INFO" });
    expect(String((one.body as { request_id: string }).request_id)).toMatch(/^req-/);
  });

  it("1.113: detail shows the caller's project on each entry (none for the system), hidden below", async () => {
    const tenant = basic("tenant", "tenant-pass");
    const r = await api(`${ctx.url}/v1/nodes/${uuid}/states/power`, {
      method: "PUT",
      headers: { ...tenant, "X-OpenStack-Ironic-API-Version": "1.113" },
      body: { target: "power on" },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    await waitForState({ url: ctx.url, headers: ops }, uuid, "active");
    const read = async (version: string) =>
      (
        (await as(`/v1/nodes/${uuid}/history/detail`, { version })).body as {
          history: Record<string, unknown>[];
        }
      ).history;
    // the outcome is written by the background power task: polled for, not given a fixed 5 s
    const entries = await until(
      async () => {
        const got = await read("1.113");
        return got.some((h) => String(h.event).startsWith("Power state is now")) ? got : undefined;
      },
      { what: "the power outcome in the history" },
    );
    const asked = entries.find((h) => String(h.event).startsWith('Power "power on" requested by tenant'))!;
    expect(asked).toMatchObject({ user: "tenant", project: "B" });
    // the background outcome is the requester's, project included
    expect(entries.find((h) => String(h.event).startsWith("Power state is now"))).toMatchObject({
      project: "B",
    });
    expect(entries.find((h) => String(h.event).includes('"active" requested'))).toMatchObject({
      project: null,
    });
    for (const entry of await read("1.112")) expect(entry).not.toHaveProperty("project");
    const list = (await as(`/v1/nodes/${uuid}/history`, { version: "1.113" })).body as {
      history: Record<string, unknown>[];
    };
    for (const entry of list.history) expect(entry).not.toHaveProperty("project");
  });

  it("1.115: detail and one entry show the state, its target and the seconds in the state left", async () => {
    const read = async (version: string) =>
      (
        (await as(`/v1/nodes/${uuid}/history/detail`, { version })).body as {
          history: Record<string, unknown>[];
        }
      ).history;
    const entries = await read("1.115");
    const reachedActive = entries.find((h) => String(h.event).includes('to "active"'))!;
    expect(reachedActive).toMatchObject({ state: "active", target_provision_state: null });
    expect(Number.isInteger(reachedActive.duration_seconds)).toBe(true);
    expect(reachedActive.duration_seconds as number).toBeGreaterThanOrEqual(0);
    const deploying = entries.find((h) => String(h.event).includes('to "deploying"'))!;
    expect(deploying).toMatchObject({ state: "deploying", target_provision_state: "active" });
    // a request's entry: the node as the request found it (available, never provisioned before: no duration
    // unless it had a provision_updated_at)
    const asked = entries.find((h) => String(h.event).includes('"active" requested'))!;
    expect(asked).toMatchObject({ state: "available", target_provision_state: null });
    const created = entries.find((h) => String(h.event).startsWith("Node created"))!;
    expect(created).toMatchObject({ state: "enroll", duration_seconds: null });
    const one = await as(`/v1/nodes/${uuid}/history/${String(deploying.uuid)}`, { version: "1.115" });
    expect(one.body).toMatchObject({ state: "deploying", target_provision_state: "active" });
    for (const entry of await read("1.114"))
      for (const key of ["state", "target_provision_state", "duration_seconds"])
        expect(entry).not.toHaveProperty(key);
    const short = (await as(`/v1/nodes/${uuid}/history`, { version: "1.115" })).body as {
      history: Record<string, unknown>[];
    };
    for (const entry of short.history) expect(entry).not.toHaveProperty("state");
  });

  it("secrets never appear in the history or its log lines", async () => {
    const detail = await as(`/v1/nodes/${uuid}/history/detail`);
    const shown = await Promise.all(
      (detail.body as { history: { uuid: string }[] }).history.map((h) =>
        as(`/v1/nodes/${uuid}/history/${h.uuid}`),
      ),
    );
    const everything = JSON.stringify(shown.map((s) => s.body)) + logLines.join("");
    expect(logLines.some((l) => l.includes('"node history"'))).toBe(true);
    for (const secret of ["hunter2-secret", "CONFIGDRIVE-SECRET", "CREATE-SECRET", "ops-pass"])
      expect(everything).not.toContain(secret);
  });

  it("a create's entry is readable as soon as its 201 is, its body masked", async () => {
    const made = await as("/v1/nodes", {
      method: "POST",
      body: { driver: "fake-hardware", name: "h-at-once", driver_info: { ipmi_password: "AT-ONCE-SECRET" } },
    });
    expect(made.status).toBe(201);
    const madeUuid = (made.body as { uuid: string }).uuid;
    const listed = (await as(`/v1/nodes/${madeUuid}/history`)).body as { history: { uuid: string }[] };
    expect(listed.history).toHaveLength(1);
    const one = await as(`/v1/nodes/${madeUuid}/history/${listed.history[0]!.uuid}`);
    expect(one.body).toMatchObject({
      event: "Node created by ops",
      event_type: "create",
      changes: { name: "h-at-once", driver_info: { ipmi_password: "******" } },
    });
    // a refused twin leaves nothing behind: still one node of that name, one entry
    const twin = await as("/v1/nodes", {
      method: "POST",
      body: { driver: "fake-hardware", name: "h-at-once" },
    });
    expect(twin.status).toBe(409);
    expect(((await as(`/v1/nodes/${madeUuid}/history`)).body as { history: unknown[] }).history).toHaveLength(
      1,
    );
  });

  it("pages with limit and marker", async () => {
    const first = (await as(`/v1/nodes/${uuid}/history?limit=2`)).body as {
      history: { uuid: string }[];
      next: string;
    };
    expect(first.history).toHaveLength(2);
    const all = (await as(`/v1/nodes/${uuid}/history`)).body as { history: { uuid: string }[] };
    const second = (await as(`/v1/nodes/${uuid}/history?limit=2&marker=${first.history[1]!.uuid}`)).body as {
      history: { uuid: string }[];
    };
    expect(second.history.map((h) => h.uuid)).toEqual(all.history.slice(2, 4).map((h) => h.uuid));
  });

  it("below 1.78 there is no history; a lessee may not read it; unknown event is 404", async () => {
    expect((await as(`/v1/nodes/${uuid}/history`, { version: "1.77" })).status).toBe(404);
    const lessee = await api(`${ctx.url}/v1/nodes/${uuid}/history`, {
      headers: { ...basic("tenant", "tenant-pass"), "X-OpenStack-Ironic-API-Version": "1.78" },
    });
    expect(lessee.status).toBe(403);
    expect((await as(`/v1/nodes/${uuid}/history/00000000-0000-0000-0000-000000000000`)).status).toBe(404);
  });

  it("the stock client reads it: baremetal node history list --long", async () => {
    const stdout = await baremetal(ctx.url, { username: "ops", password: "ops-pass" }).run(
      ["--os-baremetal-api-version", "1.78", "node", "history", "list", "h1-renamed", "--long", "-f", "json"],
      { timeoutMs: 60_000 },
    );
    const rows = JSON.parse(stdout) as Record<string, unknown>[];
    expect(rows[0]).toMatchObject({
      "Description of the event": "Node created by ops",
      "Event Origin Type": "create",
      User: "ops",
      Severity: "INFO",
    });
  });
});
