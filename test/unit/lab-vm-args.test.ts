import { describe, expect, it } from "vitest";
import { labVmArgs, withoutDisk } from "../../scripts/lab/vm-args.ts";

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
      "virtio-blk-pci,drive=d1,serial=B",
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
