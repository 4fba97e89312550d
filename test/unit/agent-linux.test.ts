import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countCpuList, parseCpuinfo, readCpu } from "../../agent/hardware/linux/cpu.ts";
import { readDisks } from "../../agent/hardware/linux/disks.ts";
import { parseMemTotal, readMemory } from "../../agent/hardware/linux/memory.ts";
import { parseKernelCmdline } from "../../agent/cmdline.ts";
import { backoffDelay, jittered } from "../../agent/link/backoff.ts";

/** A fake /proc, /sys and /dev tree: what a two-socket server with SATA, NVMe and an idle loop device shows. */
async function fixture(root: string): Promise<void> {
  const files: Record<string, string> = {
    "proc/cpuinfo": [0, 1, 2, 3]
      .map(
        (n) =>
          `processor\t: ${n}\nmodel name\t: Test CPU @ 2.0GHz\ncpu MHz\t\t: 1999.998\nphysical id\t: ${n % 2}\nflags\t\t: fpu vmx sse2\n`,
      )
      .join("\n"),
    "proc/meminfo": "MemTotal:       16318480 kB\nMemFree:         1000 kB\n",
    "sys/devices/system/cpu/online": "0-3",
    "sys/devices/system/memory/block_size_bytes": "8000000",
    "sys/devices/system/memory/memory0/online": "1",
    "sys/devices/system/memory/memory1/online": "1",
    "sys/devices/system/memory/memory2/online": "0",
    "sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/model": "Samsung SSD 870 ",
    "sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/vendor": "ATA     ",
    "sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/wwid": "naa.5002538f4123abcd",
    "sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda/size": "976773168",
    "sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda/queue/rotational": "0",
    "sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda/queue/logical_block_size":
      "512",
    "sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda/queue/physical_block_size":
      "4096",
    "sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda/serial": "S5SSNF0R123",
    "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/serial": "PHLJ912345  ",
    "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/model": "INTEL SSDPE2KX010T8",
    "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1/size": "1875385008",
    "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1/wwid": "eui.0025388b91b2c3d4",
    "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1/queue/rotational": "0",
    "sys/devices/virtual/block/loop0/size": "0",
    "sys/devices/virtual/block/loop1/size": "204800",
    "sys/devices/virtual/block/loop1/loop/backing_file": "/tmp/disk.img",
    "sys/devices/virtual/block/loop2/size": "204800",
    "sys/devices/virtual/block/ram0/size": "8192",
  };
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), content);
  }
  await mkdir(join(root, "sys/block"), { recursive: true });
  const sata = "../devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda";
  await symlink(sata, join(root, "sys/block/sda"));
  await symlink(
    "../../../0:0:0:0",
    join(root, "sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda/device"),
  );
  await symlink("../devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1", join(root, "sys/block/nvme0n1"));
  await symlink("../../nvme0", join(root, "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1/device"));
  for (const name of ["loop0", "loop1", "loop2", "ram0"]) {
    await symlink(`../devices/virtual/block/${name}`, join(root, `sys/block/${name}`));
  }
  await mkdir(join(root, "dev/disk/by-path"), { recursive: true });
  await symlink("../../sda", join(root, "dev/disk/by-path/pci-0000:00:1f.2-ata-1"));
}

describe("linux backend readers on a fixture tree", () => {
  let root: string;
  let roots: { proc: string; sys: string; dev: string };
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "anvil-sysfs-"));
    await fixture(root);
    roots = { proc: join(root, "proc"), sys: join(root, "sys"), dev: join(root, "dev") };
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it("reads CPUs: online count, sockets, flags, MHz as a string", async () => {
    const cpu = await readCpu(roots);
    expect(cpu).toMatchObject({
      count: 4,
      socket_count: 2,
      model_name: "Test CPU @ 2.0GHz",
      frequency: "1999.9980",
    });
    expect(cpu.flags).toEqual(["fpu", "vmx", "sse2"]);
  });

  it("reads memory: MemTotal in bytes, physical MiB from online memory blocks", async () => {
    expect(await readMemory(roots)).toEqual({ total: 16318480 * 1024, physical_mb: 256 });
  });

  it("reads disks from sysfs alone: serials, WWNs, HCTL, by-path; skips RAM disks and idle loops", async () => {
    const disks = await readDisks(roots);
    expect(disks.map((disk) => disk.name)).toEqual(["/dev/loop1", "/dev/nvme0n1", "/dev/sda"]);
    const [loop, nvme, sata] = disks;
    expect(loop?.size).toBe(204800 * 512);
    expect(sata).toMatchObject({
      size: 976773168 * 512,
      model: "Samsung SSD 870",
      vendor: "ATA",
      serial: "S5SSNF0R123",
      wwn: "0x5002538f4123abcd",
      hctl: "0:0:0:0",
      rotational: false,
      logical_sectors: 512,
      physical_sectors: 4096,
      by_path: `${roots.dev}/disk/by-path/pci-0000:00:1f.2-ata-1`,
      tran: "sata",
    });
    expect(nvme).toMatchObject({
      serial: "PHLJ912345",
      model: "INTEL SSDPE2KX010T8",
      tran: "nvme",
      wwn: "eui.0025388b91b2c3d4",
      hctl: null,
    });
  });
});

describe("parsers", () => {
  it("counts kernel CPU lists", () => {
    expect(countCpuList("0-3,8,10-11")).toBe(7);
    expect(countCpuList("0")).toBe(1);
  });

  it("splits /proc/cpuinfo into processors", () => {
    expect(parseCpuinfo("processor\t: 0\nflags\t: a\n\nprocessor\t: 1\n")).toHaveLength(2);
  });

  it("reads MemTotal", () => {
    expect(parseMemTotal("MemFree: 1 kB\nMemTotal:   2048 kB\n")).toBe(2048 * 1024);
    expect(parseMemTotal("nothing")).toBeNull();
  });

  it("parses the kernel command line, quotes included", () => {
    const params = parseKernelCmdline(
      'BOOT_IMAGE=/vmlinuz quiet anvil.conductor=ws://10.0.2.2:6385/v1/agent BOOTIF=01-52-54-00-aa-bb-cc x="a b"\n',
    );
    expect(params.get("anvil.conductor")).toBe("ws://10.0.2.2:6385/v1/agent");
    expect(params.get("BOOTIF")).toBe("01-52-54-00-aa-bb-cc");
    expect(params.get("quiet")).toBe("");
    expect(params.get("x")).toBe("a b");
  });
});

describe("backoff", () => {
  it("grows exponentially up to the cap, with half of each delay random", () => {
    const low = { initialMs: 100, maxMs: 1000, random: () => 0 };
    const high = { ...low, random: () => 0.999999 };
    expect([1, 2, 3, 4, 5, 10].map((n) => backoffDelay(n, low))).toEqual([50, 100, 200, 400, 500, 500]);
    expect([1, 2, 3, 4, 5, 10].map((n) => backoffDelay(n, high))).toEqual([100, 200, 400, 800, 1000, 1000]);
  });

  it("jitters heartbeats by ±10%", () => {
    expect(jittered(5000, () => 0)).toBe(4500);
    expect(jittered(5000, () => 0.5)).toBe(5000);
  });
});
