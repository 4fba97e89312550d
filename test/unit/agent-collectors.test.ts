import fc from "fast-check";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseKernelCmdline } from "../../agent/cmdline.ts";
import {
  collectLldp,
  DEFAULT_LLDP_TIMEOUT_S,
  lldpTimeoutOf,
  lldpTimeoutParam,
} from "../../agent/hardware/linux/lldp.ts";
import { readNumaTopology } from "../../agent/hardware/linux/numa.ts";
import { firstLldpPdu } from "../../agent/hardware/linux/pcap.ts";
import { pciClassType, readPciDevices } from "../../agent/hardware/linux/pci.ts";

/** A libpcap file (little-endian, µs, Ethernet) holding the given frames. */
function pcap(frames: Uint8Array[], linktype = 1): Uint8Array {
  const header = Buffer.alloc(24);
  header.writeUInt32LE(0xa1b2c3d4, 0);
  header.writeUInt16LE(2, 4);
  header.writeUInt16LE(4, 6);
  header.writeUInt32LE(1600, 16);
  header.writeUInt32LE(linktype, 20);
  const records = frames.map((frame) => {
    const record = Buffer.alloc(16);
    record.writeUInt32LE(frame.length, 8);
    record.writeUInt32LE(frame.length, 12);
    return Buffer.concat([record, frame]);
  });
  return Uint8Array.from(Buffer.concat([header, ...records]));
}
const ethernet = (type: number, payload: number[]): Uint8Array =>
  Uint8Array.from([1, 0x80, 0xc2, 0, 0, 0x0e, 2, 0, 0, 0, 0, 1, type >> 8, type & 0xff, ...payload]);

describe("the pcap reader", () => {
  it("finds the first LLDP frame's PDU, skipping other frames and a VLAN tag", () => {
    const pdu = [0x02, 0x07, 0x04, 1, 2, 3, 4, 5, 6, 0, 0];
    expect(firstLldpPdu(pcap([ethernet(0x0800, [1, 2]), ethernet(0x88cc, pdu)]))).toEqual(
      Uint8Array.from(pdu),
    );
    const tagged = ethernet(0x8100, [0, 100, 0x88, 0xcc, ...pdu]);
    expect(firstLldpPdu(pcap([tagged]))).toEqual(Uint8Array.from(pdu));
  });

  it("gives null for no frame, another link type, a cut record, or not a pcap", () => {
    expect(firstLldpPdu(pcap([]))).toBeNull();
    expect(firstLldpPdu(pcap([ethernet(0x88cc, [0, 0])], 113))).toBeNull();
    expect(firstLldpPdu(pcap([ethernet(0x88cc, [0, 0])]).subarray(0, 50))).toBeNull();
    expect(firstLldpPdu(Buffer.from("not a capture, not at all"))).toBeNull();
  });

  it("never throws on arbitrary bytes after a valid header, nor on arbitrary files (fast-check)", () => {
    const header = pcap([]);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), fc.boolean(), (bytes, withHeader) => {
        const file = withHeader ? Uint8Array.from([...header, ...bytes]) : bytes;
        const pdu = firstLldpPdu(file);
        if (pdu !== null) expect(pdu.length).toBeLessThan(file.length);
      }),
    );
  });
});

describe("the lldp collector", () => {
  it("listens on every NIC at once and reports IPA's lldp_raw, [] for a silent NIC", async () => {
    const asked: { iface: string; timeoutMs: number }[] = [];
    const raw = await collectLldp(["eth0", "eth1", "eth2"], {
      timeoutS: 1.5,
      capture: async (iface, { timeoutMs }) => {
        asked.push({ iface, timeoutMs });
        if (iface === "eth1") throw new Error("no such device");
        return iface === "eth0" ? Uint8Array.from([0x0a, 0x02, 0x73, 0x77, 0, 0]) : null;
      },
    });
    expect(raw).toEqual({
      eth0: [
        [5, "7377"],
        [0, ""],
      ],
      eth1: [],
      eth2: [],
    });
    expect(asked).toEqual(["eth0", "eth1", "eth2"].map((iface) => ({ iface, timeoutMs: 1500 })));
  });

  it("reads anvil.lldp_timeout: default when absent, off at 0, refused out of range", () => {
    expect(lldpTimeoutOf(undefined)).toBe(DEFAULT_LLDP_TIMEOUT_S);
    expect(lldpTimeoutOf("30")).toBe(30);
    expect(lldpTimeoutOf("0")).toBeNull();
    for (const bad of ["", "-1", "601", "x", "1e9"])
      expect(() => lldpTimeoutOf(bad)).toThrow(/anvil.lldp_timeout/);
  });

  it("takes IPA's ipa-lldp-timeout where anvil.lldp_timeout is absent, and prefers Anvil's own", () => {
    const timeout = (cmdline: string) => lldpTimeoutOf(lldpTimeoutParam(parseKernelCmdline(cmdline)));
    expect(timeout("console=ttyS0 ipa-lldp-timeout=12 BOOTIF=01-52-54-00-aa-bb-01")).toBe(12);
    expect(timeout("ipa-lldp-timeout=0")).toBeNull();
    expect(timeout("ipa-lldp-timeout=12 anvil.lldp_timeout=7")).toBe(7);
    expect(timeout("anvil.lldp_timeout=7 ipa-lldp-timeout=12")).toBe(7);
    expect(timeout("console=ttyS0")).toBe(DEFAULT_LLDP_TIMEOUT_S);
  });
});

describe("the PCI and NUMA collectors", () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "anvil-collectors-"));
    const files: Record<string, string> = {
      "bus/pci/devices/0000:3b:00.0/vendor": "0x10de\n",
      "bus/pci/devices/0000:3b:00.0/device": "0x20b5\n",
      "bus/pci/devices/0000:3b:00.0/class": "0x030200\n",
      "bus/pci/devices/0000:3b:00.0/revision": "0xa1\n",
      "bus/pci/devices/0000:3b:00.0/numa_node": "1\n",
      "bus/pci/devices/0000:00:03.0/vendor": "0x1af4\n",
      "bus/pci/devices/0000:00:03.0/device": "0x1000\n",
      "bus/pci/devices/0000:00:03.0/class": "0x020000\n",
      "bus/pci/devices/0000:00:03.0/numa_node": "-1\n",
      "bus/pci/devices/0000:00:04.0/vendor": "garbage\n", // unreadable ids: left out, as IPA does
      "devices/system/node/node0/meminfo": "Node 0 MemTotal:       16318460 kB\nNode 0 MemFree: 1 kB\n",
      "devices/system/node/node0/cpu0/topology/core_id": "0\n",
      "devices/system/node/node0/cpu2/topology/core_id": "0\n",
      "devices/system/node/node1/meminfo": "Node 1 MemTotal:       8000000 kB\n",
      "devices/system/node/node1/cpu1/topology/core_id": "4\n",
      "class/net/eth0/device/numa_node": "1\n",
    };
    for (const [path, content] of Object.entries(files)) {
      await mkdir(dirname(join(root, path)), { recursive: true });
      await writeFile(join(root, path), content);
    }
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it("reads IPA's pci_devices, naming a 3D controller a GPU", async () => {
    expect(await readPciDevices(root)).toEqual([
      {
        vendor_id: "1af4",
        product_id: "1000",
        class: "020000",
        revision: null,
        bus: "0000:00:03.0",
        numa_node_id: "-1",
        type: null,
      },
      {
        vendor_id: "10de",
        product_id: "20b5",
        class: "030200",
        revision: "a1",
        bus: "0000:3b:00.0",
        numa_node_id: "1",
        type: "GPU",
      },
    ]);
    expect(pciClassType("120000")).toBe("accelerator");
    expect(pciClassType("010802")).toBeNull(); // NVMe
  });

  it("reads IPA's numa_topology: RAM, cores with their thread siblings, NICs", async () => {
    expect(await readNumaTopology(root, ["eth0", "eth9"])).toEqual({
      ram: [
        { numa_node: 0, size_kb: 16318460 },
        { numa_node: 1, size_kb: 8000000 },
      ],
      cpus: [
        { cpu: 0, numa_node: 0, thread_siblings: [0, 2] },
        { cpu: 4, numa_node: 1, thread_siblings: [1] },
      ],
      nics: [{ name: "eth0", numa_node: 1 }],
    });
    expect(await readNumaTopology(join(root, "nowhere"), [])).toBeNull();
  });
});
