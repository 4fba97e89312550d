import { describe, expect, it } from "vitest";
import { DISK_BUSES, NIC_MODELS, labVmArgs, withoutDisk } from "../../scripts/lab/vm-args.ts";
import type { DiskBus, NicModel } from "../../scripts/lab/vm-args.ts";

describe("a lab VM's argv without one disk", () => {
  const argv = labVmArgs({
    dir: "/lab/vm",
    name: "lab-01",
    mac: "52:54:00:a0:00:01",
    memoryMb: 768,
    vcpus: 1,
    conductorPort: 6385,
    disks: [
      { file: "/lab/vm/a.qcow2", bus: "virtio", serial: "A" },
      { file: "/lab/vm/b.qcow2", bus: "virtio", serial: "B" },
      { file: "/lab/vm/n.qcow2", bus: "nvme", serial: "N" },
    ],
  });

  it("drops the disk's -drive and -device and keeps the others in order", () => {
    const left = withoutDisk(argv, "/lab/vm/a.qcow2");
    expect(left).toHaveLength(argv.length - 4);
    expect(left.join(" ")).not.toContain("a.qcow2");
    expect(left.join(" ")).not.toContain("drive=d0,");
    expect(left.filter((arg) => arg.startsWith("if=none"))).toEqual([
      "if=none,id=d1,file=/lab/vm/b.qcow2,format=qcow2,discard=unmap,detect-zeroes=unmap,werror=report",
      "if=none,id=d2,file=/lab/vm/n.qcow2,format=qcow2,discard=unmap,detect-zeroes=unmap,werror=report",
    ]);
    expect(left.filter((arg) => arg.includes("serial="))).toEqual([
      "virtio-blk-pci,drive=d1,ioeventfd=off,serial=B",
      "nvme,drive=d2,serial=N",
    ]);
  });

  it("logs the serial port to serial.log and serves it on serial.sock for the BMC's console", () => {
    const at = argv.indexOf("-chardev");
    expect(argv[at + 1]).toBe(
      "socket,id=console,path=/lab/vm/serial.sock,server=on,wait=off,logfile=/lab/vm/serial.log,logappend=on",
    );
    expect(argv[argv.indexOf("-serial") + 1]).toBe("chardev:console");
  });

  it("refuses a file no drive uses", () => {
    expect(() => withoutDisk(argv, "/lab/vm/a.qcow")).toThrow(/no -drive uses/);
  });
});

describe("a lab VM's NIC", () => {
  const nic = (tlsPort?: number) => {
    const argv = labVmArgs({
      dir: "/lab/vm",
      name: "lab-01",
      mac: "52:54:00:a0:00:01",
      memoryMb: 768,
      vcpus: 1,
      conductorPort: 7001,
      disks: [],
      ...(tlsPort === undefined ? {} : { tlsPort }),
    });
    return argv[argv.indexOf("-netdev") + 1] ?? "";
  };

  it("reaches only the conductor: port 80 without TLS", () => {
    expect(nic()).toContain("restrict=on");
    expect(nic().match(/guestfwd=/g)).toHaveLength(1);
    expect(nic()).toContain("guestfwd=tcp:10.0.2.100:80-cmd:busybox nc 127.0.0.1 7001");
  });

  it("with TLS, port 443 goes to the HTTPS API and port 80 stays for boot files", () => {
    expect(nic(7443).match(/guestfwd=/g)).toHaveLength(2);
    expect(nic(7443)).toContain("guestfwd=tcp:10.0.2.100:80-cmd:busybox nc 127.0.0.1 7001");
    expect(nic(7443)).toContain("guestfwd=tcp:10.0.2.100:443-cmd:busybox nc 127.0.0.1 7443");
  });
});

describe("a lab VM's NIC model and disk buses", () => {
  const argv = (nicModel: NicModel | undefined, buses: DiskBus[]) =>
    labVmArgs({
      dir: "/lab/vm",
      name: "lab-01",
      mac: "52:54:00:a0:00:01",
      memoryMb: 768,
      vcpus: 1,
      conductorPort: 7001,
      disks: buses.map((bus, index) => ({ file: `/lab/vm/${index}.qcow2`, bus, serial: `S${index}` })),
      ...(nicModel === undefined ? {} : { nicModel }),
    });
  const devices = (args: string[]) => args.filter((_, index) => args[index - 1] === "-device");

  it.each(Object.entries(NIC_MODELS))("emulates the %s NIC with QEMU's %o", (model, { device }) => {
    const nics = devices(argv(model as NicModel, [])).filter((d) => d.includes("netdev=n0"));
    expect(nics).toEqual([`${device},netdev=n0,mac=52:54:00:a0:00:01`]);
  });

  it("is virtio-net without a model", () => {
    expect(devices(argv(undefined, [])).join(" ")).toMatch(/^virtio-net-pci,netdev=n0,/);
  });

  it("puts each SCSI disk behind an HBA of its own, and virtio and NVMe disks on PCI directly", () => {
    expect(devices(argv("vmxnet3", ["megasas", "virtio", "lsi", "nvme", "mptsas"])).slice(1)).toEqual([
      "megasas,id=hba0",
      "scsi-hd,drive=d0,bus=hba0.0,serial=S0",
      "virtio-blk-pci,drive=d1,ioeventfd=off,serial=S1",
      "lsi53c895a,id=hba2",
      "scsi-hd,drive=d2,bus=hba2.0,serial=S2",
      "nvme,drive=d3,serial=S3",
      "mptsas1068,id=hba4",
      "scsi-hd,drive=d4,bus=hba4.0,serial=S4",
    ]);
  });

  it.each(Object.keys(DISK_BUSES))("drops a %s disk with its HBA and keeps the other disks", (bus) => {
    const full = argv("virtio", [bus as DiskBus, "nvme"]);
    const left = withoutDisk(full, "/lab/vm/0.qcow2");
    expect(left.join(" ")).not.toContain("0.qcow2");
    expect(left.join(" ")).not.toMatch(/hba0|drive=d0/);
    expect(devices(left).slice(1)).toEqual(["nvme,drive=d1,serial=S1"]);
  });
});
