import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, faultOf, provisionThrough, startConductor, waitForState } from "../helpers/conductor.ts";

/**
 * 1.87, the service verb (Ironic's MINOR_87_SERVICE): raw requests below and at the version, and servicing of
 * an active fake-hardware node through the step runner (fake vendor step, hold, unhold, abort).
 */
let ctx: Awaited<ReturnType<typeof startConductor>>;
const at = (version: string) => ({ "X-OpenStack-Ironic-API-Version": version });
const LOG = { interface: "vendor", step: "log_passthrough" };
const HOLD = { interface: "deploy", step: "hold" };

const provision = (uuid: string, version: string, body: Record<string, unknown>) =>
  api(`${ctx.url}/v1/nodes/${uuid}/states/provision`, { method: "PUT", headers: at(version), body });

async function show(uuid: string, version = "1.87"): Promise<Record<string, unknown>> {
  const r = await api(`${ctx.url}/v1/nodes/${uuid}`, { headers: at(version) });
  expect(r.status).toBe(200);
  return r.body as Record<string, unknown>;
}

/** A fake-hardware node taken to `active` (manage, adopt). */
async function activeNode(name: string): Promise<string> {
  const made = await api(`${ctx.url}/v1/nodes`, {
    method: "POST",
    headers: at("1.87"),
    body: { driver: "fake-hardware", name },
  });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const uuid = (made.body as { uuid: string }).uuid;
  expect((await provision(uuid, "1.87", { target: "manage" })).status).toBe(202);
  await waitForState(ctx.url, uuid, "manageable");
  expect((await provision(uuid, "1.87", { target: "adopt" })).status).toBe(202);
  await waitForState(ctx.url, uuid, "active");
  return uuid;
}

beforeAll(async () => {
  ctx = await startConductor({ fakeDelayMs: 0 });
});
afterAll(async () => {
  await ctx?.stop();
});

describe("1.87 service verb: refused below, validated at", () => {
  let uuid = "";
  beforeAll(async () => {
    uuid = await activeNode("mv87-refusals");
  });

  it("is a 406 below 1.87 with or without service_steps, and the node is untouched", async () => {
    for (const body of [{ target: "service" }, { target: "service", service_steps: [LOG] }]) {
      const r = await provision(uuid, "1.86", body);
      expect(r.status).toBe(406);
      expect(faultOf(r.body)).toBe("Request not acceptable.");
    }
    expect(await show(uuid)).toMatchObject({ provision_state: "active", last_error: null });
  });

  it("hides service_step below 1.87 and shows it (empty) at 1.87", async () => {
    expect(await show(uuid, "1.86")).not.toHaveProperty("service_step");
    expect(await show(uuid, "1.87")).toHaveProperty("service_step", {});
    const fields = await api(`${ctx.url}/v1/nodes/${uuid}?fields=uuid,service_step`, { headers: at("1.87") });
    expect(fields.status).toBe(200);
    expect(Object.keys(fields.body as object).sort()).toEqual(["links", "service_step", "uuid"]);
    // NOTE: Anvil leaves a field newer than the request out of ?fields= (every field alike); Ironic's 406
    const old = await api(`${ctx.url}/v1/nodes/${uuid}?fields=uuid,service_step`, { headers: at("1.86") });
    expect(old.body).not.toHaveProperty("service_step");
  });

  it("answers Ironic's 400 texts for missing, misplaced and unknown steps", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ target: "service" }, '"service_steps" is required when setting target provision state to service'],
      [
        { target: "service", service_steps: [] },
        '"service_steps" is required when setting target provision state to service',
      ],
      [
        { target: "rebuild", service_steps: [LOG] },
        '"service_steps" is only valid when setting target provision state to service',
      ],
      [
        { target: "service", service_steps: [{ interface: "deploy", step: "no_such_step" }] },
        "node does not support this service step: deploy.no_such_step",
      ],
    ];
    for (const [body, text] of cases) {
      const r = await provision(uuid, "1.87", body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(faultOf(r.body)).toContain(text);
    }
    // a misplaced list is a 400 even below 1.87, as Ironic checks it before the version
    const misplaced = await provision(uuid, "1.86", { target: "rebuild", service_steps: [LOG] });
    expect(misplaced.status).toBe(400);
    expect(await show(uuid)).toMatchObject({ provision_state: "active" });
  });

  it("refuses disable_ramdisk with service (Ironic's 1.108) as a 406", async () => {
    const r = await provision(uuid, "1.87", {
      target: "service",
      service_steps: [LOG],
      disable_ramdisk: true,
    });
    expect(r.status).toBe(406);
    expect(faultOf(r.body)).toBe("disable_ramdisk is not acceptable in this API version");
  });

  it("refuses service on a node that is not active", async () => {
    const made = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      headers: at("1.87"),
      body: { driver: "fake-hardware" },
    });
    const enrolled = (made.body as { uuid: string }).uuid;
    const r = await provision(enrolled, "1.87", { target: "service", service_steps: [LOG] });
    expect(r.status).toBe(400);
    expect(faultOf(r.body)).toContain("service");
    expect(await show(enrolled)).toMatchObject({ provision_state: "enroll" });
  });
});

describe("1.87 servicing a fake-hardware node", () => {
  it("runs the fake vendor step and returns to active with no error", async () => {
    const uuid = await activeNode("mv87-run");
    const r = await provision(uuid, "1.87", { target: "service", service_steps: [LOG] });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    expect(r.headers.get("location")).toBe(`${ctx.url}/v1/nodes/${uuid}/states`);
    await waitForState(ctx.url, uuid, "active");
    const node = await show(uuid);
    expect(node).toMatchObject({ provision_state: "active", last_error: null, service_step: {} });
    const internal = (await ctx.conductor.store.getNode(uuid))!.driver_internal_info;
    expect(Object.keys(internal).filter((k) => k.startsWith("service_"))).toEqual([]);
  });

  it("holds on a hold step (service_step shows it), and unhold carries on to active", async () => {
    const uuid = await activeNode("mv87-hold");
    const r = await provision(uuid, "1.87", { target: "service", service_steps: [HOLD, LOG] });
    expect(r.status).toBe(202);
    await waitForState(ctx.url, uuid, "service hold");
    const held = await show(uuid);
    expect(held).toMatchObject({ target_provision_state: "active", service_step: { step: "hold" } });
    expect((await provision(uuid, "1.87", { target: "unhold" })).status).toBe(202);
    await waitForState(ctx.url, uuid, "active");
    expect(await show(uuid)).toMatchObject({ last_error: null, service_step: {} });
  });

  it("abort in service hold fails the servicing and returns the node to active, saying so", async () => {
    const uuid = await activeNode("mv87-abort");
    await provisionThrough({ url: ctx.url, headers: at("1.87") }, uuid, [
      [{ target: "service", service_steps: [HOLD, LOG] }, "service hold"],
    ]);
    expect((await provision(uuid, "1.87", { target: "abort" })).status).toBe(202);
    const node = await show(uuid);
    expect(node).toMatchObject({ provision_state: "active", target_provision_state: null, service_step: {} });
    expect(node.last_error).toBe(
      'By request, the service operation was aborted during or after the completion of step "deploy.hold"',
    );
    // abort is not a verb an active node takes
    expect((await provision(uuid, "1.87", { target: "abort" })).status).toBe(400);
  });

  it("a second service after the first starts from a clean plan", async () => {
    const uuid = await activeNode("mv87-twice");
    for (let round = 0; round < 2; round++) {
      expect((await provision(uuid, "1.87", { target: "service", service_steps: [LOG] })).status).toBe(202);
      await waitForState(ctx.url, uuid, "active");
    }
    expect(await show(uuid)).toMatchObject({ last_error: null });
  });
});
