import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, faultOf, startConductor, waitForState } from "../helpers/conductor.ts";
import { until } from "../helpers/wait.ts";
import { MemoryMachine } from "../../scripts/lab/redfish/machine.ts";
import { startRedfishBmc, type RedfishBmc } from "../../scripts/lab/redfish/server.ts";

/**
 * Raw requests to the management endpoints (indicators 1.63, boot mode and secure boot 1.76, boot device)
 * through the redfish driver to the lab's in-memory BMC, and through fake-hardware; Ironic's shapes and errors.
 */
describe("management through the API to the lab's Redfish BMC", { timeout: 120_000 }, () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  let bmc: RedfishBmc;
  let rf = "";
  let fake = "";
  const at = (version: string) => ({ "X-OpenStack-Ironic-API-Version": version });
  const v = at("1.86");

  beforeAll(async () => {
    bmc = await startRedfishBmc({
      password: "bmc-s3cret",
      systems: [{ id: "node-1", machine: new MemoryMachine(), uuid: "5a1e0f5c-3b1d-4e5e-9a35-8c1d2f6b7a01" }],
    });
    ctx = await startConductor({ fakeDelayMs: 0 });
    const created = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      headers: v,
      body: {
        driver: "redfish",
        name: "rf-mgmt",
        deploy_interface: "fake",
        driver_info: {
          redfish_address: bmc.url,
          redfish_system_id: "/redfish/v1/Systems/node-1",
          redfish_username: "admin",
          redfish_password: "bmc-s3cret",
        },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    rf = (created.body as { uuid: string }).uuid;
    const f = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      headers: v,
      body: { driver: "fake-hardware", name: "fake-mgmt" },
    });
    fake = (f.body as { uuid: string }).uuid;
  });
  afterAll(async () => {
    await ctx?.stop();
    await bmc?.stop();
  });

  const indicators = (node: string) => `${ctx.url}/v1/nodes/${node}/management/indicators`;

  it("lists the chassis' and the system's LEDs as Ironic's IndicatorController does", async () => {
    const r = await api(indicators("rf-mgmt"), { headers: v });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const list = (r.body as { indicators: Record<string, unknown>[] }).indicators;
    expect(list.map((i) => i.name)).toEqual([
      `${bmc.manager.chassisUuid}@chassis`,
      "5a1e0f5c-3b1d-4e5e-9a35-8c1d2f6b7a01@system",
    ]);
    expect(Object.keys(list[1]!).sort()).toEqual(["component", "links", "name", "readonly", "states"]);
    expect(list[1]).toMatchObject({
      component: "system",
      readonly: false,
      states: ["blinking", "off", "on"],
    });
    expect(list[1]!.links).toEqual([
      {
        href: `${ctx.url}/v1/nodes/rf-mgmt/management/indicators/5a1e0f5c-3b1d-4e5e-9a35-8c1d2f6b7a01@system`,
        rel: "self",
      },
      {
        href: `${ctx.url}/nodes/rf-mgmt/management/indicators/5a1e0f5c-3b1d-4e5e-9a35-8c1d2f6b7a01@system`,
        rel: "bookmark",
      },
    ]);
  });

  it("sets and reads a LED on the BMC (api-ref's capitals taken, Ironic's small letters answered)", async () => {
    const chassis = `${indicators(rf)}/${bmc.manager.chassisUuid}@chassis`;
    const put = await api(chassis, { method: "PUT", headers: v, body: { state: "BLINKING" } });
    expect(put.status, JSON.stringify(put.body)).toBe(204);
    expect(bmc.manager.chassisLed).toBe("Blinking");
    expect((await api(chassis, { headers: v })).body).toEqual({ state: "blinking" });
    const system = `${indicators(rf)}/5a1e0f5c-3b1d-4e5e-9a35-8c1d2f6b7a01@system`;
    expect((await api(system, { method: "PUT", headers: v, body: { state: "on" } })).status).toBe(204);
    expect(bmc.systems.get("node-1")!.led).toBe("Lit");
    expect((await api(system, { headers: v })).body).toEqual({ state: "on" });
  });

  it("answers Ironic's errors: 404 below 1.63, malformed and unknown names, bad states", async () => {
    const old = await api(indicators(rf), { headers: at("1.62") });
    expect(old.status).toBe(404);
    const malformed = await api(`${indicators(rf)}/no-component`, { headers: v });
    expect(malformed.status).toBe(400);
    expect(faultOf(malformed.body)).toBe('Malformed indicator name "no-component"');
    const unknown = await api(`${indicators(rf)}/nope@system`, { headers: v });
    expect(unknown.status).toBe(400);
    expect(faultOf(unknown.body)).toBe(`Unknown indicator nope for component system of node ${rf}`);
    const bad = await api(`${indicators(rf)}/5a1e0f5c-3b1d-4e5e-9a35-8c1d2f6b7a01@system`, {
      method: "PUT",
      headers: v,
      body: { state: "disco" },
    });
    expect(bad.status).toBe(400);
    expect(faultOf(bad.body)).toContain("must be one of on, off, blinking");
    expect(bmc.systems.get("node-1")!.led).toBe("Lit");
  });

  it("fake-hardware offers Ironic's fake indicators; its read-only chassis LED refuses a change", async () => {
    const r = await api(indicators(fake), { headers: v });
    const names = (r.body as { indicators: { name: string }[] }).indicators.map((i) => i.name);
    expect(names).toEqual(["led-0@chassis", "led@system"]);
    expect((await api(`${indicators(fake)}/led@system`, { headers: v })).body).toEqual({ state: "on" });
    const set = await api(`${indicators(fake)}/led@system`, {
      method: "PUT",
      headers: v,
      body: { state: "off" },
    });
    expect(set.status).toBe(204);
    expect((await api(`${indicators(fake)}/led@system`, { headers: v })).body).toEqual({ state: "off" });
    const ro = await api(`${indicators(fake)}/led-0@chassis`, {
      method: "PUT",
      headers: v,
      body: { state: "on" },
    });
    expect(ro.status).toBe(400);
  });

  it("boot mode and secure boot setters (1.76) reach the BMC's Boot and SecureBoot resources", async () => {
    const put = (what: string, target: unknown) =>
      api(`${ctx.url}/v1/nodes/${rf}/states/${what}`, { method: "PUT", headers: v, body: { target } });
    expect((await put("boot_mode", "bios")).status).toBe(202);
    await until(async () => (bmc.systems.get("node-1")!.boot.mode === "Legacy" ? true : undefined), {
      what: "the BMC's BootSourceOverrideMode to be Legacy",
    });
    await until(
      async () =>
        ((await api(`${ctx.url}/v1/nodes/${rf}`, { headers: v })).body as { boot_mode?: string })
          .boot_mode === "bios" || undefined,
      { what: "the node to record bios" },
    );
    expect((await put("boot_mode", "uefi")).status).toBe(202);
    await until(async () => (bmc.systems.get("node-1")!.boot.mode === "UEFI" ? true : undefined), {
      what: "the BMC's BootSourceOverrideMode to be UEFI",
    });
    await until(
      async () =>
        ((await api(`${ctx.url}/v1/nodes/${rf}`, { headers: v })).body as { boot_mode?: string })
          .boot_mode === "uefi" || undefined,
      { what: "the node to record uefi" },
    );
    expect((await put("secure_boot", true)).status).toBe(202);
    await until(async () => (bmc.systems.get("node-1")!.secureBoot ? true : undefined), {
      what: "the BMC's SecureBootEnable to be true",
    });
  });

  it("a BMC refusing the request's value is 400, an unavailable BMC 503, never a 500", async () => {
    // the system lists its allowed targets: Usb is not one Anvil maps, so refuse a device by AllowableValues
    const device = (body: unknown) =>
      api(`${ctx.url}/v1/nodes/${rf}/management/boot_device`, { method: "PUT", headers: v, body });
    bmc.misbehave.unavailable = 100;
    const down = await device({ boot_device: "pxe" });
    expect(down.status, JSON.stringify(down.body)).toBe(503);
    expect(faultOf(down.body)).toMatch(/^Driver operation failed: .*HTTP 503/);
    bmc.misbehave.unavailable = 0;
    const ok = await device({ boot_device: "pxe" });
    expect(ok.status, JSON.stringify(ok.body)).toBe(204);
  });
  it("sets the BMC clock by the management.set_bmc_clock manual clean step (Ironic's)", async () => {
    const provision = (body: unknown) =>
      api(`${ctx.url}/v1/nodes/${rf}/states/provision`, { method: "PUT", headers: v, body });
    expect((await provision({ target: "manage" })).status).toBe(202);
    await waitForState(ctx.url, rf, "manageable");
    const step = (args: Record<string, unknown>) => ({
      target: "clean",
      disable_ramdisk: true,
      clean_steps: [{ interface: "management", step: "set_bmc_clock", args }],
    });
    const bad = await provision(step({ target_datetime: "yesterday" }));
    expect(bad.status).toBe(400);
    expect(faultOf(bad.body)).toMatch(
      /set_bmc_clock has invalid arguments: target_datetime: not an ISO 8601/,
    );
    const target = "2031-03-04T05:06:07+00:00";
    const ok = await provision(step({ target_datetime: target, datetime_local_offset: "+05:30" }));
    expect(ok.status, JSON.stringify(ok.body)).toBe(202);
    await waitForState(ctx.url, rf, "manageable");
    const node = (await api(`${ctx.url}/v1/nodes/${rf}`, { headers: v })).body as { last_error: unknown };
    expect(node.last_error).toBeNull();
    // the BMC now runs at the target (its clock has ticked on by at most the test's own duration)
    const bmcNow = Date.now() + bmc.manager.clockOffsetMs;
    expect(bmcNow - Date.parse(target)).toBeGreaterThanOrEqual(0);
    expect(bmcNow - Date.parse(target)).toBeLessThan(60_000);
    expect(bmc.manager.localOffset).toBe("+05:30");
  });
});
