import { join } from "node:path";

/** The address a lab VM uses for the conductor: slirp forwards it to the host (restrict=on cuts the rest). */
export const GUEST_CONDUCTOR_IP = "10.0.2.100";
export const GUEST_CONDUCTOR_URL = `http://${GUEST_CONDUCTOR_IP}`;
/** The conductor's API and agent link as the VMs see them when the lab runs TLS (port 443 forwarded). */
export const GUEST_CONDUCTOR_HTTPS_URL = `https://${GUEST_CONDUCTOR_IP}`;

/**
 * The NICs QEMU 7.2 emulates that a lab node can have (each with an iPXE ROM in ipxe-qemu, so it PXE-boots),
 * and the Linux driver that binds each (what the agent's inventory reports as the interface's driver).
 * QEMU 8.0 adds `igb`; Debian bookworm's 7.2 lacks it.
 */
export const NIC_MODELS = {
  virtio: { device: "virtio-net-pci", driver: "virtio_net" },
  e1000: { device: "e1000", driver: "e1000" },
  e1000e: { device: "e1000e", driver: "e1000e" },
  vmxnet3: { device: "vmxnet3", driver: "vmxnet3" },
  // QEMU's RTL8139 is a C+ chip (revision 0x20): 8139cp takes it, 8139too leaves it
  rtl8139: { device: "rtl8139", driver: "8139cp" },
} as const;
export type NicModel = keyof typeof NIC_MODELS;

/**
 * Where a disk sits: a virtio or NVMe device of its own, or a SCSI disk behind an emulated RAID/SAS HBA (one HBA
 * per disk) with the Linux driver that binds that HBA. SeaBIOS boots from all of these.
 */
export const DISK_BUSES = {
  virtio: { device: "virtio-blk-pci", hba: null },
  nvme: { device: "nvme", hba: null },
  megasas: { device: "scsi-hd", hba: { device: "megasas", driver: "megaraid_sas" } },
  "megasas-gen2": { device: "scsi-hd", hba: { device: "megasas-gen2", driver: "megaraid_sas" } },
  lsi: { device: "scsi-hd", hba: { device: "lsi53c895a", driver: "sym53c8xx" } },
  mptsas: { device: "scsi-hd", hba: { device: "mptsas1068", driver: "mptsas" } },
} as const;
export type DiskBus = keyof typeof DISK_BUSES;

/**
 * virtio-blk under TCG with ioeventfd (QEMU 7.2's default) now and then loses a request: the guest waits on it
 * for ever, idle, and QEMU has nothing in flight. The ramdisk test's fio over the virtio disk stalled in 2 of
 * 22 passes beside `stress-ng --cpu 2 --hdd 1`, once in CI; with `ioeventfd=off` (the guest's kick handled in
 * its vCPU thread) 0 of 50, each pass 12 % slower (6.62 s against 5.88 s). The lab's machines are QEMU's,
 * not the product's.
 */
const VIRTIO_BLK_TCG = ",ioeventfd=off";

/** The `-device` arguments of disk `index` (its drive `d<index>`): the HBA first when it sits behind one. */
export function diskDeviceArgs(bus: DiskBus, index: number, properties: string): string[] {
  const { device, hba } = DISK_BUSES[bus];
  if (bus === "virtio") return ["-device", `${device},drive=d${index}${VIRTIO_BLK_TCG}${properties}`];
  if (hba === null) return ["-device", `${device},drive=d${index}${properties}`];
  return [
    ...["-device", `${hba.device},id=hba${index}`],
    ...["-device", `${device},drive=d${index},bus=hba${index}.0${properties}`],
  ];
}

export interface LabVmDisk {
  file: string;
  bus: DiskBus;
  serial: string;
}

export interface LabVmOptions {
  /** The VM's dir: serial.log, serial.sock, monitor.sock, qemu.pid live there. */
  dir: string;
  name: string;
  mac: string;
  memoryMb: number;
  vcpus: number;
  disks: LabVmDisk[];
  /** The port on the host's 127.0.0.1 behind the guest's http://10.0.2.100 (the conductor, or its boot files). */
  conductorPort: number;
  /** With TLS: the conductor's HTTPS port on the host, behind the guest's https://10.0.2.100. */
  tlsPort?: number;
  /** The NIC QEMU emulates (default virtio). */
  nicModel?: NicModel;
  /** A second NIC (virtio, no boot ROM) on a host tap: the lab's LLDP switch port. */
  switchPort?: { tap: string; mac: string };
}

/**
 * QEMU's argv for a lab node, without the boot order (the BMC's boot device picks it at each power on).
 * TCG only (KVM is unusable on these machines). The NIC is slirp with restrict=on: the guest reaches
 * nothing but the conductor, through one forward (slirp refuses forwards on 10.0.2.2 itself).
 */
export function labVmArgs(options: LabVmOptions): string[] {
  const nic = [
    "user,id=n0",
    `bootfile=${GUEST_CONDUCTOR_URL}/boot/boot.ipxe`,
    "restrict=on",
    `guestfwd=tcp:${GUEST_CONDUCTOR_IP}:80-cmd:busybox nc 127.0.0.1 ${options.conductorPort}`,
    ...(options.tlsPort === undefined
      ? []
      : [`guestfwd=tcp:${GUEST_CONDUCTOR_IP}:443-cmd:busybox nc 127.0.0.1 ${options.tlsPort}`]),
  ].join(",");
  const args = [
    ...["-accel", "tcg", "-machine", "pc", "-name", options.name],
    ...["-m", String(options.memoryMb), "-smp", String(options.vcpus)],
    // -nographic makes SeaBIOS and iPXE print to the serial port too; the console is appended to one
    // file across power-ons, so a test can read the whole life of the node, and served on a socket (one
    // client at a time; output is logged whether or not one is there) that the lab Redfish BMC relays as
    // its Telnet serial console.
    "-nographic",
    ...[
      "-chardev",
      `socket,id=console,path=${join(options.dir, "serial.sock")},server=on,wait=off,` +
        `logfile=${join(options.dir, "serial.log")},logappend=on`,
    ],
    ...["-serial", "chardev:console"],
    ...["-monitor", `unix:${join(options.dir, "monitor.sock")},server=on,wait=off`],
    ...[
      "-netdev",
      nic,
      "-device",
      `${NIC_MODELS[options.nicModel ?? "virtio"].device},netdev=n0,mac=${options.mac}`,
    ],
    // romfile= (none): the firmware must not try to network-boot from the switch port, only the slirp NIC
    ...(options.switchPort === undefined
      ? []
      : [
          ...["-netdev", `tap,id=n1,ifname=${options.switchPort.tap},script=no,downscript=no`],
          ...["-device", `virtio-net-pci,netdev=n1,mac=${options.switchPort.mac},romfile=`],
        ]),
  ];
  options.disks.forEach((disk, index) => {
    // discard=unmap: a guest's discard (blkdiscard, NVMe deallocate) punches holes in the qcow2, so an erase
    // by discard frees the host's space and reads back zeros, as on a thin-provisioned disk.
    // detect-zeroes=unmap: a pass of zeros is stored as holes too, as a thin-provisioned array does, so the
    // overwrite erase of two 5 GiB RAID members costs the host no 10 GiB (it did, and a CI disk ran out).
    // werror=report: a host out of space fails the guest's write (the agent reports it, the step fails)
    // instead of QEMU's default of pausing the VM, which left a test waiting 20 minutes for nothing.
    args.push(
      "-drive",
      `if=none,id=d${index},file=${disk.file},format=qcow2,discard=unmap,detect-zeroes=unmap,werror=report`,
    );
    args.push(...diskDeviceArgs(disk.bus, index, `,serial=${disk.serial}`));
  });
  return args;
}

/**
 * The argv without one disk (its `-drive` and the `-device` that uses it): a lab VM restarted with it is a
 * machine whose disk died. Pure. @throws Error when no drive uses the file
 */
export function withoutDisk(argv: readonly string[], file: string): string[] {
  const driveAt = argv.findIndex(
    (arg, index) => argv[index - 1] === "-drive" && arg.split(",").includes(`file=${file}`),
  );
  if (driveAt < 0) throw new Error(`no -drive uses ${file}`);
  const id = /(?:^|,)id=([^,]+)/.exec(argv[driveAt] ?? "")?.[1];
  const deviceAt = argv.findIndex(
    (arg, index) => argv[index - 1] === "-device" && arg.split(",").includes(`drive=${id}`),
  );
  // a disk behind its own HBA (bus=hbaN.0) takes the HBA with it
  const hba = /(?:^|,)bus=([^,.]+)\./.exec(argv[deviceAt] ?? "")?.[1];
  const hbaAt = argv.findIndex(
    (arg, index) =>
      hba !== undefined && argv[index - 1] === "-device" && arg.split(",").includes(`id=${hba}`),
  );
  const drop = new Set([
    driveAt - 1,
    driveAt,
    ...(deviceAt < 0 ? [] : [deviceAt - 1, deviceAt]),
    ...(hbaAt < 0 ? [] : [hbaAt - 1, hbaAt]),
  ]);
  return argv.filter((_, index) => !drop.has(index));
}
