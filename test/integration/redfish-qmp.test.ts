import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { QemuMachine, bootOrderOf } from "../../scripts/lab/redfish/qmp.ts";
import { startRedfishBmc } from "../../scripts/lab/redfish/server.ts";
import { RedfishConnections } from "../../conductor/drivers/redfish/client.ts";
import { RedfishPower } from "../../conductor/drivers/redfish/power.ts";
import { until } from "../helpers/wait.ts";

/** The lab BMC's QEMU machine, through QMP, on a QEMU with no guest at all (-machine none). */
describe("the lab's Redfish BMC driving QEMU through QMP", { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-rf-qmp-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("maps boot sources to QEMU's boot order", () => {
    expect(["Pxe", "Cd", "Hdd", "None"].map(bootOrderOf)).toEqual(["n", "d", "c", "c"]);
  });

  it("starts QEMU on power on, reads query-status, and quits it on ForceOff", async () => {
    const machine = new QemuMachine({
      argv: ["-machine", "none", "-nodefaults", "-display", "none", "-S"],
      qmpSocket: join(dir, "qmp.sock"),
    });
    const bmc = await startRedfishBmc({ systems: [{ id: "vm", machine }] });
    const conn = new RedfishConnections({ backoffMs: 1 });
    try {
      const power = new RedfishPower({ connections: conn, pollIntervalMs: 50, powerTimeoutMs: 30_000 });
      const node = {
        uuid: "0d0c5a2e-7c53-4d5e-8f2b-3f6f1d1c8a90",
        name: null,
        driver_info: { redfish_address: bmc.url, redfish_username: "admin", redfish_password: "password" },
        properties: {},
        instance_info: {},
        driver_internal_info: {},
        ports: [],
      };
      expect(await power.getPowerState(node)).toBe("power off");
      await power.setPowerState(node, "power on");
      await until(async () => ((await machine.power()) === "On" ? true : undefined), { timeoutMs: 30_000 });
      expect(await power.getPowerState(node)).toBe("power on");
      await power.setPowerState(node, "power off");
      expect(await machine.power()).toBe("Off");
    } finally {
      await conn.close();
      await bmc.stop();
    }
  });
});
