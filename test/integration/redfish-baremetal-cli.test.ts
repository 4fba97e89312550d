import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startConductor } from "../helpers/conductor.ts";
import { MemoryMachine } from "../../scripts/lab/redfish/machine.ts";
import { startRedfishBmc, type RedfishBmc } from "../../scripts/lab/redfish/server.ts";

const run = promisify(execFile);

/** The stock baremetal CLI enrolling and driving a node through Anvil's redfish type and the lab BMC. */
describe("baremetal --driver redfish against the lab's in-memory Redfish BMC", { timeout: 300_000 }, () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  let bmc: RedfishBmc;
  const machine = new MemoryMachine();

  const bm = async (...args: string[]): Promise<string> => {
    const { stdout } = await run("baremetal", ["--os-auth-type", "none", "--os-endpoint", ctx.url, ...args], {
      env: { ...process.env, OS_CLOUD: "", NO_PROXY: "127.0.0.1", no_proxy: "127.0.0.1" },
      timeout: 60_000,
    });
    return stdout;
  };
  const bmJson = async (...args: string[]): Promise<Record<string, unknown>> =>
    JSON.parse(await bm(...args, "-f", "json")) as Record<string, unknown>;
  const field = async (name: string): Promise<string> =>
    (await bm("node", "show", "rf1", "--fields", name, "-f", "value")).trim();

  beforeAll(async () => {
    bmc = await startRedfishBmc({
      password: "bmc-s3cret",
      systems: [
        {
          id: "node-1",
          machine,
          cpus: 8,
          memoryMiB: 16384,
          disks: [{ id: "sda", bytes: 100 * 1024 ** 3 }],
          macs: ["52:54:00:12:00:01", "52:54:00:12:00:02"],
        },
      ],
    });
    ctx = await startConductor({ fakeDelayMs: 10 });
  });
  afterAll(async () => {
    await ctx.stop();
    // the conductor ended its Redfish session as it stopped
    expect(bmc.sessions.size).toBe(0);
    await bmc.stop();
  });

  it("lists the redfish driver and its properties", async () => {
    expect(await bm("driver", "list", "-f", "value")).toContain("redfish");
    const props = await bm("driver", "property", "list", "redfish", "-f", "value");
    expect(props).toContain("redfish_address");
    expect(props).toContain("redfish_verify_ca");
  });

  it("enrolls the node with Ironic's driver_info names, password masked", async () => {
    const node = await bmJson(
      "node",
      "create",
      "--driver",
      "redfish",
      "--name",
      "rf1",
      "--deploy-interface",
      "fake",
      "--driver-info",
      `redfish_address=${bmc.url}`,
      "--driver-info",
      "redfish_system_id=/redfish/v1/Systems/node-1",
      "--driver-info",
      "redfish_username=admin",
      "--driver-info",
      "redfish_password=bmc-s3cret",
    );
    expect(node).toMatchObject({
      driver: "redfish",
      power_interface: "redfish",
      management_interface: "redfish",
      inspect_interface: "redfish",
      deploy_interface: "fake",
    });
    const shown = await bmJson("node", "show", "rf1", "--fields", "driver_info");
    expect((shown.driver_info as Record<string, unknown>).redfish_password).toBe("******");
    expect(JSON.stringify(shown)).not.toContain("bmc-s3cret");
  });

  it("manages the node, reading its power state through Redfish", async () => {
    await bm("node", "manage", "rf1", "--wait", "60");
    expect(await field("provision_state")).toBe("manageable");
    expect(await field("power_state")).toBe("power off");
  });

  it("powers the node on and off", async () => {
    await bm("node", "power", "on", "rf1", "--power-timeout", "30");
    expect(machine.state).toBe("On");
    expect(await field("power_state")).toBe("power on");
    await bm("node", "power", "off", "rf1", "--power-timeout", "30");
    expect(machine.state).toBe("Off");
    expect(await field("power_state")).toBe("power off");
  });

  it("sets and shows the boot device", async () => {
    await bm("node", "boot", "device", "set", "rf1", "pxe", "--persistent");
    expect(await bmJson("node", "boot", "device", "show", "rf1")).toEqual({
      boot_device: "pxe",
      persistent: true,
    });
    expect(bmc.systems.get("node-1")!.boot).toMatchObject({ target: "Pxe", enabled: "Continuous" });
    const supported = await bmJson("node", "boot", "device", "show", "rf1", "--supported");
    expect(supported.supported_boot_devices).toBe("pxe, disk, cdrom, bios");
  });

  it("inspects out of band: properties, a port per MAC, then the inspection rules", async () => {
    const rule = await api(`${ctx.url}/v1/inspection_rules`, {
      method: "POST",
      headers: { "X-OpenStack-Ironic-API-Version": "1.96" },
      body: {
        conditions: [{ op: "eq", args: { values: ["{inventory[cpu][architecture]}", "x86_64"] } }],
        actions: [
          { op: "set-attribute", args: { path: "resource_class", value: "redfish-x86" } },
          { op: "add-trait", args: { name: "CUSTOM_REDFISH" } },
        ],
      },
    });
    expect(rule.status).toBe(201);
    await bm("node", "inspect", "rf1", "--wait", "60");
    expect(await field("resource_class")).toBe("redfish-x86");
    expect((await bmJson("node", "show", "rf1", "--fields", "traits")).traits).toEqual(["CUSTOM_REDFISH"]);
    expect(await field("provision_state")).toBe("manageable");
    const properties = (await bmJson("node", "show", "rf1", "--fields", "properties")).properties;
    expect(properties).toMatchObject({ cpus: 8, memory_mb: 16384, local_gb: 99, cpu_arch: "x86_64" });
    const ports = await bm("port", "list", "--node", "rf1", "-f", "value", "-c", "Address");
    expect(ports.trim().split("\n").sort()).toEqual(["52:54:00:12:00:01", "52:54:00:12:00:02"]);
  });

  it("provides and deploys on the fake deploy interface, powered through Redfish", async () => {
    await bm("node", "provide", "rf1", "--wait", "60");
    expect(await field("provision_state")).toBe("available");
    await bm("node", "deploy", "rf1", "--wait", "60");
    expect(await field("provision_state")).toBe("active");
    expect(await field("power_state")).toBe("power on");
    expect(machine.state).toBe("On");
  });

  it("reboots and sends an NMI through Redfish", async () => {
    const before = machine.log.length;
    await bm("node", "reboot", "rf1");
    expect(machine.log.slice(before).map((l) => l.type)).toEqual(["ForceOff", "On"]);
    await bm("node", "inject", "nmi", "rf1");
    expect(machine.nmis).toBe(1);
  });

  it("puts a BMC failure in last_error and in Ironic's error envelope with its reason", async () => {
    await bm("node", "maintenance", "set", "rf1");
    await bm("node", "set", "rf1", "--driver-info", "redfish_password=wrong");
    await bm("node", "maintenance", "unset", "rf1");
    const failure = await bm("node", "boot", "device", "show", "rf1").catch(
      (error: { stderr: string }) => error.stderr,
    );
    // Ironic's DriverOperationError envelope with the BMC's reason, not an unexplained internal error
    expect(failure).toMatch(/Driver operation failed: Redfish authentication failed/);
    expect(failure).not.toMatch(/Internal server error/);
    expect(failure).not.toContain("wrong");
    await bm("node", "power", "off", "rf1", "--power-timeout", "30").catch(() => undefined);
    expect(await field("last_error")).toMatch(/Redfish authentication failed at http:\/\/127\.0\.0\.1:\d+/);
  });
});
