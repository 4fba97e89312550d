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
      "if=none,id=d1,file=/lab/vm/b.qcow2,format=qcow2,discard=unmap",
      "if=none,id=d2,file=/lab/vm/n.qcow2,format=qcow2,discard=unmap",
    ]);
    expect(left.filter((arg) => arg.includes("serial="))).toEqual([
      "virtio-blk-pci,drive=d1,serial=B",
      "nvme,drive=d2,serial=N",
    ]);
  });

  it("refuses a file no drive uses", () => {
    expect(() => withoutDisk(argv, "/lab/vm/a.qcow")).toThrow(/no -drive uses/);
  });
});
