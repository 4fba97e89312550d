import { afterEach, describe, expect, it } from "vitest";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";
import { RedfishConnections } from "../../conductor/drivers/redfish/client.ts";
import { RedfishManagement } from "../../conductor/drivers/redfish/management.ts";
import { RedfishPower } from "../../conductor/drivers/redfish/power.ts";
import { DEFAULT_QUIRKS, QUIRK_TABLE, quirksFor } from "../../conductor/drivers/redfish/quirks.ts";
import { ComputerSystemSchema } from "../../conductor/drivers/redfish/schemas.ts";
import { MemoryMachine } from "../../scripts/lab/redfish/machine.ts";
import { startRedfishBmc, type Misbehaviour, type RedfishBmc } from "../../scripts/lab/redfish/server.ts";

// ComputerSystem answers as vendors' BMCs give them, trimmed to the fields the quirk table and the driver read
const RECORDED = {
  // iDRAC 8, PowerEdge R720 (System.Embedded.1)
  dell: {
    "@odata.id": "/redfish/v1/Systems/System.Embedded.1",
    Id: "System.Embedded.1",
    Manufacturer: "Dell Inc.",
    Model: "PowerEdge R720",
    PowerState: "Off",
    SystemType: "Physical",
    Actions: {
      "#ComputerSystem.Reset": {
        target: "/redfish/v1/Systems/System.Embedded.1/Actions/ComputerSystem.Reset",
        "ResetType@Redfish.AllowableValues": ["On", "ForceOff", "GracefulRestart", "PushPowerButton", "Nmi"],
      },
    },
    Boot: {
      BootSourceOverrideTarget: "None",
      BootSourceOverrideEnabled: "Once",
      BootSourceOverrideMode: "UEFI",
    },
  },
  // iLO 5 (lower-case paths, trailing slashes, an etag)
  hpe: {
    "@odata.etag": 'W/"0E79655D"',
    "@odata.id": "/redfish/v1/Systems/1/",
    Id: "1",
    Manufacturer: "HPE",
    Model: "ProLiant DL360 Gen10",
    BiosVersion: "U32 v2.42 (10/04/2022)",
    PowerState: "On",
    Actions: {
      "#ComputerSystem.Reset": {
        "ResetType@Redfish.AllowableValues": ["On", "ForceOff", "ForceRestart", "Nmi", "PushPowerButton"],
        target: "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset/",
      },
    },
  },
  supermicro: {
    "@odata.id": "/redfish/v1/Systems/1",
    Id: "1",
    Manufacturer: "Supermicro",
    Model: "SYS-1029U-TRT",
    PowerState: "On",
    Boot: {
      BootSourceOverrideEnabled: "Disabled",
      BootSourceOverrideTarget: "None",
      BootSourceOverrideMode: "UEFI",
      "BootSourceOverrideTarget@Redfish.AllowableValues": ["None", "Pxe", "Hdd", "Cd", "BiosSetup", "UsbCd"],
    },
  },
  asrock: {
    "@odata.id": "/redfish/v1/Systems/Self",
    Id: "Self",
    Manufacturer: "ASRockRack",
    Model: "ROMED8U-2T",
    PowerState: "Off",
  },
  ami: {
    "@odata.id": "/redfish/v1/Systems/Self",
    Id: "Self",
    Manufacturer: "American Megatrends International",
    Model: "AMI Redfish Server",
  },
  lenovo: { "@odata.id": "/redfish/v1/Systems/1", Id: "1", Manufacturer: "Lenovo", Model: "7X06CTO1WW" },
};

describe("the quirk table", () => {
  it.each([
    ["dell", ["idrac10-power-on-409"]],
    ["hpe", ["ilo-boot-during-post"]],
    ["supermicro", ["supermicro-override-enabled"]],
    ["asrock", ["ami-full-boot-request"]],
    ["ami", ["ami-full-boot-request"]],
    ["lenovo", []],
  ] as const)("matches the recorded %s answer to %j", (vendor, ids) => {
    const system = ComputerSystemSchema.parse(RECORDED[vendor]);
    expect(quirksFor(system).matched).toEqual(ids);
  });

  it("gives every entry a source and a change from the defaults", () => {
    for (const entry of QUIRK_TABLE) {
      expect(entry.source).toMatch(/https:\/\/|Ironic commit [0-9a-f]{9}/);
      const { quirks } = quirksFor({ Manufacturer: RECORDED_MANUFACTURER[entry.id] }, [entry]);
      expect(quirks).not.toEqual(DEFAULT_QUIRKS);
    }
  });

  it("leaves a system without Manufacturer on the defaults", () => {
    expect(quirksFor({}).quirks).toEqual(DEFAULT_QUIRKS);
  });
});

const RECORDED_MANUFACTURER: Record<string, string> = {
  "supermicro-override-enabled": "Supermicro",
  "ami-full-boot-request": "ASRockRack",
  "idrac10-power-on-409": "Dell Inc.",
  "ilo-boot-during-post": "HPE",
};

describe("each quirk against a BMC playing the deviation", () => {
  const bmcs: RedfishBmc[] = [];
  const conns: RedfishConnections[] = [];
  afterEach(async () => {
    for (const c of conns.splice(0)) await c.close();
    for (const b of bmcs.splice(0)) await b.stop();
  });

  async function bmcOf(manufacturer: string, misbehave: Misbehaviour, machine = new MemoryMachine()) {
    const bmc = await startRedfishBmc({ systems: [{ id: "s1", manufacturer, machine }], misbehave });
    bmcs.push(bmc);
    const conn = new RedfishConnections({ backoffMs: 1 });
    conns.push(conn);
    const management = new RedfishManagement({ connections: conn, postRetryDelayMs: 1 });
    const power = new RedfishPower({
      connections: conn,
      management,
      pollIntervalMs: 1,
      powerTimeoutMs: 2000,
    });
    const node: DriverNode = {
      uuid: "9f0f4a84-6c8b-4b8e-9d3e-5c0f1a2b3c4d",
      name: null,
      driver_info: { redfish_address: bmc.url, redfish_username: "admin", redfish_password: "password" },
      properties: { capabilities: "boot_mode:uefi" },
      instance_info: {},
      driver_internal_info: {},
      ports: [],
    };
    return { bmc, power, management, node, machine };
  }

  it("Dell: power on refused with 409 ActionParameterValueConflict is retried until the BMC settles", async () => {
    const { power, node, machine } = await bmcOf("Dell Inc.", { powerOnConflicts: 5 });
    await power.setPowerState(node, "power on");
    expect(machine.state).toBe("On");
  });

  it("other vendors: the same five conflicts exhaust the default retries, in Ironic's words", async () => {
    const { power, node } = await bmcOf("Lenovo", { powerOnConflicts: 5 });
    await expect(power.setPowerState(node, "power on")).rejects.toThrow(
      /Setting power state to power on failed for node .*HTTP 409.*ActionParameterValueConflict/,
    );
  });

  it("HPE: a boot change refused during POST is retried", async () => {
    const { management, node, bmc } = await bmcOf("HPE", { bootPatchesDuringPost: 2 });
    await management.setBootDevice(node, { device: "pxe", persistent: false });
    expect(bmc.systems.get("s1")!.boot.target).toBe("Pxe");
  });

  it("without the HPE quirk the POST refusal is reported", async () => {
    const { management, node } = await bmcOf("Lenovo", { bootPatchesDuringPost: 1 });
    await expect(management.setBootDevice(node, { device: "pxe", persistent: false })).rejects.toThrow(
      /UnableToModifyDuringSystemPOST/,
    );
  });

  it("Supermicro: BootSourceOverrideEnabled is sent even when unchanged, so it does not revert to Once", async () => {
    const { management, node, bmc } = await bmcOf("Supermicro", { enabledRevertsUnlessSent: true });
    await management.setBootDevice(node, { device: "disk", persistent: true });
    await management.setBootDevice(node, { device: "pxe", persistent: true });
    expect(bmc.systems.get("s1")!.boot).toMatchObject({ target: "Pxe", enabled: "Continuous" });
  });

  it("a generic BMC with the same behaviour loses Continuous (why the quirk exists)", async () => {
    const { management, node, bmc } = await bmcOf("Lenovo", { enabledRevertsUnlessSent: true });
    await management.setBootDevice(node, { device: "disk", persistent: true });
    await management.setBootDevice(node, { device: "pxe", persistent: true });
    expect(bmc.systems.get("s1")!.boot.enabled).toBe("Once");
  });

  it("any BMC refusing Continuous gets Once, set again before each power on", async () => {
    const { management, power, node, machine } = await bmcOf("Lenovo", { refuseContinuous: true });
    await management.setBootDevice(node, { device: "pxe", persistent: true });
    expect(await management.getBootDevice(node)).toEqual({ boot_device: "pxe", persistent: true });
    await power.setPowerState(node, "power on");
    await power.setPowerState(node, "power off");
    await power.setPowerState(node, "power on");
    expect(machine.log.filter((l) => l.type === "On").map((l) => l.bootSource)).toEqual(["Pxe", "Pxe"]);
  });
});
