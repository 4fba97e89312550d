// Ironic's console API (NodeConsoleController) on fake-hardware: shapes, errors in Ironic's words, policy,
// and the fake console's loop-back through the WebSocket.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { Identity, Role } from "../../conductor/auth/identity.ts";
import { allowed } from "../../conductor/auth/policy.ts";
import { parseConsoleBody } from "../../conductor/api/node-console.ts";
import { ConductorError } from "../../conductor/errors.ts";
import { api, startConductor } from "../helpers/conductor.ts";
import { waitFor } from "../helpers/wait.ts";

let ctx: Awaited<ReturnType<typeof startConductor>>;
const path = (node: string) => `/v1/nodes/${node}/states/console`;

function fault(body: unknown): string {
  const envelope = body as { error_message?: string };
  return (JSON.parse(envelope.error_message ?? "{}") as { faultstring: string }).faultstring;
}

async function createNode(name: string, extra: Record<string, unknown> = {}): Promise<string> {
  const created = await api(`${ctx.url}/v1/nodes`, {
    method: "POST",
    body: { name, driver: "fake-hardware", ...extra },
  });
  expect(created.status).toBe(201);
  return (created.body as { uuid: string }).uuid;
}

beforeAll(async () => {
  ctx = await startConductor();
  await createNode("fake-1");
  await createNode("quiet-1", { console_interface: "no-console" });
});
afterAll(async () => ctx?.stop());

describe("GET and PUT /v1/nodes/{id}/states/console", () => {
  it("answers Ironic's shape: disabled with no info, then the WebSocket once enabled", async () => {
    const before = await api(`${ctx.url}${path("fake-1")}`);
    expect(before).toMatchObject({ status: 200, body: { console_enabled: false, console_info: null } });
    const put = await api(`${ctx.url}${path("fake-1")}`, { method: "PUT", body: { enabled: "true" } });
    expect(put.status).toBe(202);
    expect(put.body).toBeNull();
    await waitFor(async () => {
      const states = await api(`${ctx.url}/v1/nodes/fake-1/states`);
      return (states.body as { console_enabled: boolean }).console_enabled;
    });
    const after = await api(`${ctx.url}${path("fake-1")}`);
    const body = after.body as { console_enabled: boolean; console_info: Record<string, string> };
    expect(body.console_enabled).toBe(true);
    expect(Object.keys(body.console_info).sort()).toEqual(["type", "url"]);
    expect(body.console_info.type).toBe("websocket");

    const ws = new WebSocket(body.console_info.url!);
    const got: Buffer[] = [];
    ws.on("message", (data: Buffer) => got.push(data));
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
    await waitFor(() => Buffer.concat(got).toString().includes("fake-1 login: "));
    ws.send("admin\r");
    await waitFor(() => Buffer.concat(got).toString().endsWith("admin\r\n"));

    const closed = new Promise<number>((resolve) => ws.once("close", (code) => resolve(code)));
    const off = await api(`${ctx.url}${path("fake-1")}`, { method: "PUT", body: { enabled: false } });
    expect(off.status).toBe(202);
    expect(await closed).toBe(1000);
    await waitFor(async () => {
      const state = await api(`${ctx.url}${path("fake-1")}`);
      return (state.body as { console_enabled: boolean }).console_enabled === false;
    });
  });

  it("asking for the mode the console is already in is accepted and changes nothing", async () => {
    const put = await api(`${ctx.url}${path("fake-1")}`, { method: "PUT", body: { enabled: false } });
    expect(put.status).toBe(202);
    expect((await api(`${ctx.url}${path("fake-1")}`)).body).toEqual({
      console_enabled: false,
      console_info: null,
    });
  });

  it("refuses a node whose console_interface is no-console (Ironic's UnsupportedDriverExtension)", async () => {
    const put = await api(`${ctx.url}${path("quiet-1")}`, { method: "PUT", body: { enabled: true } });
    expect(put.status).toBe(400);
    expect(fault(put.body)).toBe(
      "Driver fake-hardware does not support console (disabled or not implemented).",
    );
    // not enabled: GET answers the disabled shape, as Ironic's get_console_information checks that first
    expect((await api(`${ctx.url}${path("quiet-1")}`)).body).toEqual({
      console_enabled: false,
      console_info: null,
    });
  });

  it("answers 400 for a bad body and 404 for an unknown node, in Ironic's envelope", async () => {
    for (const [body, message] of [
      [{}, "Missing mandatory parameter: enabled"],
      [{ enabled: true, extra: 1 }, "Unexpected arguments: extra"],
      [{ enabled: "maybe" }, "Invalid enabled: Unrecognized value 'maybe'"],
      [[true], "Missing mandatory parameter: enabled"],
    ] as const) {
      const put = await api(`${ctx.url}${path("fake-1")}`, { method: "PUT", body });
      expect(put.status).toBe(400);
      expect(fault(put.body)).toContain(message);
    }
    const missing = await api(`${ctx.url}${path("no-such-node")}`);
    expect(missing.status).toBe(404);
  });

  it("answers 409 while the node is locked", async () => {
    const uuid = await createNode("locked-1");
    await ctx.conductor.store.updateNode(uuid, { reservation: "someone-else" });
    const put = await api(`${ctx.url}${path("locked-1")}`, { method: "PUT", body: { enabled: true } });
    expect(put.status).toBe(409);
    await ctx.conductor.store.updateNode(uuid, { reservation: null });
  });
});

describe("parseConsoleBody", () => {
  it("never throws anything but a 400 on arbitrary JSON, and reads only strict booleans", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (body) => {
        try {
          const enabled = parseConsoleBody(body);
          expect(typeof enabled).toBe("boolean");
          expect(Object.keys(body as object)).toEqual(["enabled"]);
        } catch (error) {
          expect(error).toBeInstanceOf(ConductorError);
          expect((error as ConductorError).status).toBe(400);
        }
      }),
    );
  });
});

describe("console policy (Ironic's defaults: system member or owner member)", () => {
  const who = (role: Role, project: string | null = null): Identity => ({
    user: "u",
    role,
    project,
    method: "http_basic",
  });
  const node = { owner: "A", lessee: "B" };
  for (const rule of ["baremetal:node:get_console", "baremetal:node:set_console_state"] as const) {
    it(rule, () => {
      const people = [who("admin"), who("member"), who("reader"), who("member", "A"), who("reader", "A")];
      expect(people.map((p) => allowed(rule, p, node))).toEqual([true, true, false, true, false]);
      expect(allowed(rule, who("admin", "B"), node)).toBe(false);
    });
  }
});
