// A BMC that does not answer, or refuses the credentials, is a clear error in Ironic's envelope on every
// management and power endpoint (it was a bare 500 "see the conductor log"), with a real ipmitool.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultConfig } from "../../conductor/config.ts";
import { driverRegistry } from "../../conductor/drivers/hardware-type.ts";
import { Ipmitool } from "../../conductor/drivers/ipmi/ipmitool.ts";
import { IpmitoolManagement } from "../../conductor/drivers/management/ipmitool.ts";
import { IpmitoolPower } from "../../conductor/drivers/power/ipmitool.ts";
import { fakeHardware, ipmiHardware } from "../../conductor/drivers/registry.ts";
import { api, startConductor } from "../helpers/conductor.ts";
import { freeUdpPort, startIpmiSim, type IpmiSim } from "../helpers/ipmi-sim.ts";

let ctx: Awaited<ReturnType<typeof startConductor>>;
let sim: IpmiSim;

/** The parsed fault of Ironic's envelope, with its faultcode. */
function fault(body: unknown): { faultcode: string; faultstring: string } {
  const envelope = body as { error_message?: string };
  expect(typeof envelope.error_message).toBe("string");
  return JSON.parse(envelope.error_message ?? "{}") as { faultcode: string; faultstring: string };
}

beforeAll(async () => {
  sim = await startIpmiSim();
  const config = defaultConfig();
  // give up on a silent BMC after one short try: the test is about the answer, not the retry policy
  const ipmitool = new Ipmitool({ retries: 0, sessionTimeoutSec: 1, sessionRetries: 1, minIntervalMs: 10 });
  const ipmi = {
    ...ipmiHardware(config),
    power: new IpmitoolPower({ ipmitool }),
    management: new IpmitoolManagement({ ipmitool }),
  };
  ctx = await startConductor({}, { drivers: driverRegistry([fakeHardware(config), ipmi]) });
  const silentPort = await freeUdpPort();
  for (const [name, info] of [
    [
      "silent",
      { ipmi_address: "127.0.0.1", ipmi_port: silentPort, ipmi_username: "admin", ipmi_password: "pw" },
    ],
    ["badpw", { ...sim.driverInfo(), ipmi_password: "not-the-password" }],
  ] as const) {
    const created = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      body: { name, driver: "ipmi", driver_info: info },
    });
    expect(created.status).toBe(201);
  }
});
afterAll(async () => {
  await ctx?.stop();
  await sim?.stop();
});

describe("BMC failures on management and power endpoints", () => {
  it("a BMC that does not answer is a 503 with the reason (Ironic's TemporaryFailure)", async () => {
    for (const [method, path, body] of [
      ["GET", "/v1/nodes/silent/management/boot_device", undefined],
      ["PUT", "/v1/nodes/silent/management/boot_device", { boot_device: "pxe" }],
    ] as const) {
      const response = await api(`${ctx.url}${path}`, { method, body });
      expect(response.status, `${method} ${path}`).toBe(503);
      const { faultcode, faultstring } = fault(response.body);
      expect(faultcode).toBe("Server");
      expect(faultstring).toMatch(/did not answer/);
      expect(faultstring).not.toMatch(/see the conductor log/);
    }
  });

  it("refused credentials are a 500 with the reason (Ironic's IPMIFailure), never the password", async () => {
    const response = await api(`${ctx.url}/v1/nodes/badpw/management/boot_device`);
    expect(response.status).toBe(500);
    const { faultcode, faultstring } = fault(response.body);
    expect(faultcode).toBe("Server");
    expect(faultstring).toMatch(/wrong password|refused|unauthorized|Driver operation failed/i);
    expect(JSON.stringify(response.body)).not.toContain("not-the-password");
  });

  it("power changes answer 202 and record the BMC failure in last_error; validate reports it", async () => {
    const response = await api(`${ctx.url}/v1/nodes/silent/states/power`, {
      method: "PUT",
      body: { target: "power on" },
    });
    expect(response.status).toBe(202);
    await ctx.conductor.provisioner.settle();
    const node = (await api(`${ctx.url}/v1/nodes/silent`)).body as { last_error: string | null };
    expect(node.last_error).toMatch(/Failed to change power state.*did not answer/);
    const supported = await api(`${ctx.url}/v1/nodes/silent/management/boot_device/supported`);
    expect(supported.status).toBe(200);
    const validate = await api(`${ctx.url}/v1/nodes/silent/validate`);
    expect(validate.status).toBe(200);
    // the conductor still serves the fleet
    expect((await api(`${ctx.url}/v1/nodes`)).status).toBe(200);
  });
});
