import fc from "fast-check";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseEthtoolDriverInfo, readNicFirmware } from "../../agent/hardware/linux/nic-firmware.ts";
import { type Interface, NicFirmwareSchema } from "../../shared/inventory.ts";

// ethtool 6.1's `ethtool -i` (Debian bookworm) for a QEMU virtio NIC, and for an Intel X710 (i40e)
const VIRTIO = `driver: virtio_net
version: 1.0.0
firmware-version: 
expansion-rom-version: 
bus-info: 0000:00:03.0
supports-statistics: yes
supports-test: no
supports-eeprom-access: no
supports-register-dump: no
supports-priv-flags: no
`;
const I40E = `driver: i40e
version: 6.1.0-18-amd64
firmware-version: 8.15 0x80009621 1.2829.0
expansion-rom-version: 
bus-info: 0000:3b:00.0
supports-statistics: yes
`;

function nic(name: string, driver: string | null, pci: string | null): Interface {
  return {
    name,
    mac_address: `52:54:00:00:00:0${name.length}`,
    ipv4_address: null,
    ipv6_address: null,
    has_carrier: true,
    lldp: null,
    vendor: null,
    product: null,
    client_id: null,
    biosdevname: null,
    speed_mbps: null,
    pci_address: pci,
    driver,
  };
}

describe("parseEthtoolDriverInfo", () => {
  it("reads the driver, its version, the firmware and the bus address; an empty field is null", () => {
    expect(parseEthtoolDriverInfo(VIRTIO)).toEqual({
      driver: "virtio_net",
      driver_version: "1.0.0",
      firmware_version: null,
      expansion_rom_version: null,
      bus_info: "0000:00:03.0",
    });
    expect(parseEthtoolDriverInfo(I40E)).toMatchObject({
      driver: "i40e",
      firmware_version: "8.15 0x80009621 1.2829.0",
    });
    expect(parseEthtoolDriverInfo("Cannot get driver information: Operation not supported\n")).toBeNull();
    expect(parseEthtoolDriverInfo("__proto__: x\nconstructor: y\ndriver: e1000\n")).toMatchObject({
      driver: "e1000",
    });
  });

  it("never throws, and what it returns fits the plugin_data schema", () => {
    const line = fc.oneof(
      fc.string(),
      fc.constantFrom(...VIRTIO.split("\n"), ...I40E.split("\n")),
      fc
        .tuple(
          fc.constantFrom("driver", "version", "firmware-version", "bus-info", "toString"),
          fc.string({ maxLength: 80 }),
        )
        .map(([label, value]) => `${label}: ${value}`),
    );
    fc.assert(
      fc.property(fc.array(line, { maxLength: 20 }), (lines) => {
        const info = parseEthtoolDriverInfo(lines.join("\n"));
        if (info === null) return;
        const entry = { name: "eth0", mac_address: "52:54:00:00:00:01", ...info, source: "ethtool" };
        expect(NicFirmwareSchema.safeParse(entry).success).toBe(true);
        for (const value of Object.values(info)) {
          if (value !== null) expect(value).not.toMatch(/\p{Cc}/u);
        }
      }),
    );
  });
});

describe("readNicFirmware", () => {
  let sys = "";
  beforeAll(async () => {
    sys = await mkdtemp(join(tmpdir(), "anvil-nic-firmware-"));
    await mkdir(join(sys, "module", "e1000e"), { recursive: true });
    await writeFile(join(sys, "module", "e1000e", "version"), "3.2.6-k\n");
  });
  afterAll(async () => rm(sys, { recursive: true, force: true }));

  it("takes each NIC's answer from ethtool, and sysfs's for a NIC ethtool cannot answer for", async () => {
    const asked: string[] = [];
    const result = await readNicFirmware(
      sys,
      [nic("eth0", "i40e", "0000:3b:00.0"), nic("eth1", "e1000e", "0000:00:19.0")],
      async (iface) => (asked.push(iface), iface === "eth0" ? I40E : null),
    );
    expect(asked).toEqual(["eth0", "eth1"]);
    expect(result).toEqual([
      expect.objectContaining({
        name: "eth0",
        firmware_version: "8.15 0x80009621 1.2829.0",
        source: "ethtool",
      }),
      expect.objectContaining({
        name: "eth1",
        driver: "e1000e",
        driver_version: "3.2.6-k",
        firmware_version: null,
        bus_info: "0000:00:19.0",
        source: "sysfs",
      }),
    ]);
  });

  it("without ethtool, answers from sysfs for every NIC after one try", async () => {
    let tries = 0;
    const result = await readNicFirmware(
      sys,
      [nic("eth0", "e1000e", "0000:00:19.0"), nic("eth1", "virtio_net", null)],
      async () => {
        tries += 1;
        throw Object.assign(new Error("spawn ethtool ENOENT"), { code: "ENOENT" });
      },
    );
    expect(tries).toBe(1);
    expect(result.map((entry) => [entry.driver, entry.driver_version, entry.source])).toEqual([
      ["e1000e", "3.2.6-k", "sysfs"],
      ["virtio_net", null, "sysfs"],
    ]);
  });
});
