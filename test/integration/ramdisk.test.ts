import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import { CollectorDataSchema, InventorySchema } from "../../shared/inventory.ts";
import type { FioJobResult } from "../../shared/burnin.ts";
import { ensureAgentBuilt } from "../helpers/agent.ts";
import { FakeConductor } from "../helpers/fake-conductor.ts";
import { waitFor } from "../helpers/wait.ts";
import { readDocumentedModules } from "../helpers/ramdisk-drivers.ts";
import { startQemu } from "../helpers/qemu.ts";
import type { QemuVm } from "../helpers/qemu.ts";

const ROOT = resolve(import.meta.dirname, "../..");
const STAND_IN = join(ROOT, "images/ramdisk/stand-in-agent.sh");
// The real agent, built first when missing or stale; ANVIL_RAMDISK_STAND_IN=1 swaps in a shell script with
// its command line that only dials, to test the ramdisk alone.
const USE_STAND_IN = process.env.ANVIL_RAMDISK_STAND_IN === "1";
// The boot NIC is QEMU's vmxnet3 and a second NIC its RTL8139, so the drivers beyond virtio carry DHCP, the
// agent's link and the image download; a third disk sits behind QEMU's MegaRAID SAS (megaraid_sas), and the
// image is written to it and booted from it by SeaBIOS, as a server's RAID-controller disk is.
// (QEMU 7.2 has no igb: docs/lab.md.)
const MAC = "52:54:00:4a:4e:01";
const SECOND_MAC = "52:54:00:4a:4e:02";
// big enough for the test image and a config drive partition
const MEGASAS_BYTES = 160 * 1024 * 1024;
const BOOT_TIMEOUT_MS = 180_000;
const WRITE_TIMEOUT_MS = 600_000;
const VIRTIO_BYTES = 160 * 1024 * 1024;
const NVME_BYTES = 64 * 1024 * 1024;
const INSTANCE_UUID = "5e1f0c4a-0d1e-4b6a-9f3e-00000000a4a4";
const PANIC = /Kernel panic/;

/** A config drive as Ironic sends it: base64 of a gzipped ISO 9660 labelled config-2. */
async function configDrive(dir: string): Promise<string> {
  const latest = join(dir, "root", "openstack", "latest");
  await mkdir(latest, { recursive: true });
  await writeFile(
    join(latest, "meta_data.json"),
    JSON.stringify({ uuid: INSTANCE_UUID, hostname: "node-1" }),
  );
  const iso = join(dir, "configdrive.iso");
  const made = await exec("genisoimage", [
    "-quiet",
    "-o",
    iso,
    "-V",
    "config-2",
    "-r",
    "-J",
    join(dir, "root"),
  ]);
  expect(made.code, made.stderr).toBe(0);
  return gzipSync(await readFile(iso)).toString("base64");
}

describe(`the deploy ramdisk boots in QEMU and starts the agent (${USE_STAND_IN ? "stand-in" : "real agent"})`, () => {
  let dir: string;
  let conductor: FakeConductor;
  let port: number;
  let vm: QemuVm | undefined;
  let vmStarted = 0;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-ramdisk-test-"));
    const agent = USE_STAND_IN ? STAND_IN : await ensureAgentBuilt();
    // Cached by content under .tmp/cache: only the first run after a change compresses.
    const build = await exec("bash", ["images/ramdisk/build.sh", "--agent", agent, "--out", dir], {
      cwd: ROOT,
      timeoutMs: 900_000,
    });
    expect(build.code, build.stderr).toBe(0);
    conductor = await FakeConductor.start();
    port = conductor.port;
    // Two empty disks with serials, so the inventory has something to find (sysfs only: no udev in the ramdisk),
    // the virtio one big enough for the test image and a config drive partition.
    for (const [name, size] of [
      ["nvme.raw", NVME_BYTES],
      ["virtio.raw", VIRTIO_BYTES],
      ["megasas.raw", MEGASAS_BYTES],
    ] as const) {
      const created = await exec("truncate", ["-s", String(size), join(dir, name)]);
      expect(created.code).toBe(0);
    }
    vm = await startQemu({
      // The RAM docs/ramdisk.md says a node needs.
      memoryMb: 512,
      nics: [
        { kind: "user", mac: MAC, model: "vmxnet3" },
        { kind: "user", mac: SECOND_MAC, model: "rtl8139" },
      ],
      disks: [
        { path: join(dir, "virtio.raw"), format: "raw", serial: "ANVIL-VIRTIO-1", bus: "virtio" },
        // QEMU's NVMe drive reports a critical warning (0x4: reliability degraded), as a dying drive does
        {
          path: join(dir, "nvme.raw"),
          format: "raw",
          serial: "ANVIL-NVME-1",
          bus: "nvme",
          smartCriticalWarning: 0x4,
        },
        { path: join(dir, "megasas.raw"), format: "raw", serial: "ANVIL-MEGASAS-1", bus: "megasas" },
      ],
      boot: {
        kernel: join(dir, "anvil.kernel"),
        initrd: join(dir, "anvil.initramfs"),
        // IPA's spelling of the LLDP timeout, which the agent takes too: 0 turns the collector off (no switch here)
        append: `console=ttyS0 anvil.conductor=ws://10.0.2.2:${port}/v1/agent ipa-lldp-timeout=0 BOOTIF=01-${MAC.replaceAll(":", "-")}`,
      },
    });
    // After startQemu: it may first wait for a free VM slot.
    vmStarted = Date.now();
  }, 1_000_000);

  afterAll(async () => {
    await vm?.stop();
    await conductor?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it(
    "loads drivers.md's modules in its order: the device drivers for the devices present only",
    async () => {
      // The console ends lines with \r\n; the line after each list proves the list is complete.
      const text = await vm!.waitForSerial(/anvil-init: modules not loaded, no device for them:[^\n]*\n/, {
        timeoutMs: BOOT_TIMEOUT_MS,
        failOn: PANIC,
      });
      const words = (label: string): string[] =>
        new RegExp(`anvil-init: ${label}:([^\\r\\n]*)`).exec(text)?.[1]?.trim().split(" ").filter(Boolean) ??
        [];
      const loaded = words("modules loaded");
      const idle = words("modules not loaded, no device for them");
      const listed = await readDocumentedModules();
      // every listed module either loaded or had no device; the loaded ones in the list's order
      expect([...loaded, ...idle].sort()).toEqual([...listed].sort());
      expect(loaded).toEqual(listed.filter((module) => loaded.includes(module)));
      // this VM's devices: vmxnet3 and RTL8139 NICs, NVMe, virtio and MegaRAID SAS disks
      for (const module of ["virtio_pci", "virtio_blk", "vmxnet3", "nvme", "megaraid_sas"])
        expect(loaded, module).toContain(module);
      expect(loaded.some((module) => module === "8139too" || module === "8139cp")).toBe(true);
      // always loaded: no device names them
      for (const module of [
        "sd_mod",
        "md_mod",
        "raid1",
        "raid456",
        "sr_mod",
        "isofs",
        "ext4",
        "8021q",
        "bonding",
      ])
        expect(loaded, module).toContain(module);
      // hardware this VM lacks
      for (const module of ["ice", "mlx5_core", "qede", "bnxt_en", "hpsa", "smartpqi", "virtio_net"])
        expect(idle, module).toContain(module);
      expect(text).not.toContain("modules that failed to load");
    },
    BOOT_TIMEOUT_MS,
  );

  it(
    "names the boot interface and gets a DHCP lease on it",
    async () => {
      const named = await vm!.waitForSerial(/anvil-init: \S+ \([0-9a-f:]+\) is the boot interface/, {
        timeoutMs: BOOT_TIMEOUT_MS,
        failOn: PANIC,
      });
      const link = new RegExp(`anvil-init: (\\S+) \\(${MAC}\\) is the boot interface`).exec(named)?.[1];
      expect(link, named.slice(-2000)).toBeDefined();
      // each NIC is on a slirp network of its own, so both get slirp's first lease
      const text = await vm!.waitForSerial(/anvil-dhcp: \S+: bound[\s\S]*anvil-dhcp: \S+: bound/, {
        timeoutMs: BOOT_TIMEOUT_MS,
        failOn: PANIC,
      });
      expect(text).toMatch(
        new RegExp(`anvil-dhcp: ${link}: bound 10\\.0\\.2\\.15/24 router 10\\.0\\.2\\.2 dns 10\\.0\\.2\\.3`),
      );
    },
    BOOT_TIMEOUT_MS,
  );

  it(
    "starts the agent with the conductor URL from the kernel command line",
    async () => {
      const text = await vm!.waitForSerial(/anvil-init: starting agent/, {
        timeoutMs: BOOT_TIMEOUT_MS,
        failOn: PANIC,
      });
      expect(text).toContain(
        `anvil-agent service --conductor ws://10.0.2.2:${port}/v1/agent --log-level info --token-file /run/anvil/token`,
      );
    },
    BOOT_TIMEOUT_MS,
  );

  it.runIf(!USE_STAND_IN)(
    "the agent dials the conductor and says hello with the boot interface's MAC",
    async () => {
      await waitFor(() => conductor.frames.some((frame) => frame.type === "hello"), {
        timeoutMs: BOOT_TIMEOUT_MS,
      });
      const seconds = ((Date.now() - vmStarted) / 1000).toFixed(1);
      const text = await vm!.readSerial();
      const uptime = /starting agent \(up ([0-9.]+)s\)/.exec(text)?.[1];
      // Measured, not asserted (tests never fail on time): QEMU start -> hello, and guest uptime at agent start.
      console.log(
        `ramdisk under TCG: hello ${seconds} s after QEMU started; agent started at guest uptime ${uptime} s`,
      );
      expect(conductor.upgrades[0]).toBe("/v1/agent");
      expect(conductor.frames[0]).toMatchObject({
        type: "hello",
        macs: expect.arrayContaining([MAC]) as unknown,
      });
    },
    BOOT_TIMEOUT_MS,
  );

  it.runIf(!USE_STAND_IN)(
    "the agent's inventory, taken inside the ramdisk, finds the disks by serial and the NICs by their drivers",
    async () => {
      const result = await conductor.call("get_inventory", {}, BOOT_TIMEOUT_MS);
      expect(result).toMatchObject({ ok: true });
      const inventory = InventorySchema.parse(result.ok ? result.value : null);
      const disks = inventory.disks.map((disk) => ({
        name: disk.name,
        serial: disk.serial,
        size: disk.size,
      }));
      expect(disks).toEqual(
        expect.arrayContaining([
          { name: "/dev/vda", serial: "ANVIL-VIRTIO-1", size: VIRTIO_BYTES },
          { name: "/dev/nvme0n1", serial: "ANVIL-NVME-1", size: NVME_BYTES },
          {
            name: expect.stringMatching(/^\/dev\/sd[a-z]$/) as unknown,
            serial: "ANVIL-MEGASAS-1",
            size: MEGASAS_BYTES,
          },
        ]),
      );
      // The SCSI disk's host is the MegaRAID one: the kernel names the driver of each SCSI host it registers.
      const scsi = inventory.disks.find((disk) => disk.serial === "ANVIL-MEGASAS-1");
      const host = /^(\d+):\d+:\d+:\d+$/.exec(scsi?.hctl ?? "")?.[1];
      expect(host, JSON.stringify(scsi)).toBeDefined();
      expect(await vm!.readSerial()).toMatch(new RegExp(`scsi host${host}: [^\r\n]*MegaRAID`));
      const nics = inventory.interfaces.map((nic) => ({ mac: nic.mac_address, driver: nic.driver }));
      expect(nics).toEqual(
        expect.arrayContaining([
          { mac: MAC, driver: "vmxnet3" },
          { mac: SECOND_MAC, driver: "8139cp" },
        ]),
      );
      // plugin_data's nic_firmware from the ramdisk's ethtool -i: QEMU's NICs name their driver and PCI address;
      // their firmware version is whatever the emulated device reports (none for these two), so it is not asserted
      const asked = Date.now();
      const data = await conductor.call("get_inspection_data", {}, BOOT_TIMEOUT_MS);
      const inspectionSeconds = ((Date.now() - asked) / 1000).toFixed(1);
      const collected = CollectorDataSchema.parse(data.ok ? data.value : null);
      // ipa-lldp-timeout=0 on the command line turned the LLDP collector off: no lldp_raw at all
      expect(collected.lldp_raw).toBeUndefined();
      expect(collected.pci_devices?.length).toBeGreaterThan(0);
      const firmware = collected.nic_firmware ?? [];
      for (const [mac, driver] of [
        [MAC, "vmxnet3"],
        [SECOND_MAC, "8139cp"],
      ] as const) {
        const entry = firmware.find((nic) => nic.mac_address === mac);
        const pci = inventory.interfaces.find((nic) => nic.mac_address === mac)?.pci_address;
        expect(entry, JSON.stringify(firmware)).toMatchObject({ driver, source: "ethtool", bus_info: pci });
      }
      // Measured, not asserted: the collectors' time
      console.log(`get_inspection_data in ${inspectionSeconds} s; nic_firmware: ${JSON.stringify(firmware)}`);
    },
    BOOT_TIMEOUT_MS,
  );

  it.runIf(!USE_STAND_IN)(
    "smart_check fails naming the NVMe drive whose SMART reports a critical warning, and passes a sound disk",
    async () => {
      const failed = await conductor.call("smart_check", {}, BOOT_TIMEOUT_MS);
      expect(failed.ok, JSON.stringify(failed)).toBe(false);
      const message = failed.ok ? "" : failed.error.message;
      expect(message).toMatch(/\/dev\/nvme0n1 failing: SMART overall-health self-assessment: FAILED/);
      expect(message).toContain("NVMe critical warning 0x4");
      // only the dying drive is named
      expect(message).not.toMatch(/\/dev\/(vda|sd[a-z])/);
      const sound = await conductor.call("smart_check", { devices: ["/dev/vda"] }, BOOT_TIMEOUT_MS);
      expect(sound, JSON.stringify(sound)).toMatchObject({ ok: true });
    },
    BOOT_TIMEOUT_MS,
  );

  it.runIf(!USE_STAND_IN)(
    "burnin_cpu and burnin_memory run the ramdisk's stress-ng and report its figures",
    async () => {
      for (const [name, args, stressor] of [
        ["burnin_cpu", { timeout: 2, cpu: 1 }, "cpu"],
        ["burnin_memory", { timeout: 2, vm: 1, vm_bytes: "32m" }, "vm"],
      ] as const) {
        const result = await conductor.call(name, args, BOOT_TIMEOUT_MS);
        expect(result, JSON.stringify(result)).toMatchObject({
          ok: true,
          value: { tool: "stress-ng", stressor },
        });
        const metrics = result.ok ? (result.value as { metrics: { bogo_ops: number }[] }).metrics : [];
        expect(metrics.length).toBeGreaterThan(0);
        expect(metrics[0]?.bogo_ops).toBeGreaterThan(0);
        console.log(`${name} under TCG in the ramdisk: ${JSON.stringify(metrics)}`);
      }
    },
    BOOT_TIMEOUT_MS,
  );

  it.runIf(!USE_STAND_IN)(
    "burnin_disk runs the ramdisk's fio (libaio, CRC32C verify) over the whole virtio disk and reports its figures",
    async () => {
      const started = Date.now();
      // a stall (no I/O completed on the disk for 60 s) fails the step with its own text, well within the
      // test's bound, and the serial console below shows what the guest did meanwhile
      const result = await conductor.call(
        "burnin_disk",
        { loops: 1, devices: ["/dev/vda"], stall_timeout: 60 },
        BOOT_TIMEOUT_MS,
      );
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      const serial = result.ok ? "" : (await readFile(vm!.serialLog, "utf8")).slice(-3000);
      expect(result, `${JSON.stringify(result)}\n${serial}`).toMatchObject({
        ok: true,
        value: { tool: "fio", loops: 1, devices: [{ name: "/dev/vda", error: 0, total_errors: 0 }] },
      });
      const [device] = result.ok ? (result.value as { devices: FioJobResult[] }).devices : [];
      // a mixed read/write pass over the whole drive: together fio moved at least its size
      expect((device?.read_bytes ?? 0) + (device?.write_bytes ?? 0)).toBeGreaterThanOrEqual(VIRTIO_BYTES);
      expect(device?.write_mb_s).toBeGreaterThan(0);
      // Measured, not asserted: what this step adds to the boot.
      console.log(`burnin_disk under TCG in the ramdisk: ${seconds} s; ${JSON.stringify(result)}`);
    },
    BOOT_TIMEOUT_MS,
  );

  it.runIf(!USE_STAND_IN)(
    "the agent writes the compressed qcow2 test image and a config drive to the MegaRAID disk the hints pick, which then boots",
    async () => {
      const images = join(dir, "images");
      const built = await exec(
        "bash",
        ["images/test/build.sh", "--id", "ramdisk-deployed", "--out", images],
        {
          cwd: ROOT,
          timeoutMs: 600_000,
        },
      );
      expect(built.code, built.stderr).toBe(0);
      const image = join(images, "ramdisk-deployed.compressed.qcow2");
      const sha256 = createHash("sha256")
        .update(await readFile(image))
        .digest("hex");
      const result = await conductor.call(
        "write_image",
        {
          image: {
            url: conductor.serve("deployed.qcow2", image),
            checksum: { algo: "sha256", value: sha256 },
            image_type: "whole-disk",
          },
          configdrive: await configDrive(join(dir, "configdrive")),
          root_device: { serial: "ANVIL-MEGASAS-1" },
        },
        WRITE_TIMEOUT_MS,
      );
      expect(result, JSON.stringify(result)).toMatchObject({
        ok: true,
        value: { checksum: { value: sha256 } },
      });
      const written = result.ok ? (result.value as { bytes_written?: number; duration_ms?: number }) : {};
      console.log(
        `write_image under TCG: ${written.bytes_written} bytes to the MegaRAID disk in ${written.duration_ms} ms`,
      );
      await conductor.call("sync", {}, BOOT_TIMEOUT_MS);

      // Power off the ramdisk and boot the machine from the disk it wrote.
      await vm?.stop();
      vm = await startQemu({
        memoryMb: 256,
        nics: [],
        boot: "disk",
        disks: [{ path: join(dir, "megasas.raw"), format: "raw", serial: "ANVIL-MEGASAS-1", bus: "megasas" }],
        extraArgs: ["-nic", "none"],
      });
      const text = await vm.waitForSerial(/ANVIL-TEST-IMAGE-CONFIGDRIVE[^\n]*\n/, {
        timeoutMs: BOOT_TIMEOUT_MS,
        failOn: PANIC,
      });
      expect(text).toContain("ANVIL-TEST-IMAGE-BOOTED ramdisk-deployed\r\n");
      expect(text).toMatch(new RegExp(`ANVIL-TEST-IMAGE-CONFIGDRIVE sd[a-z]\\d uuid=${INSTANCE_UUID}\r\n`));
    },
    WRITE_TIMEOUT_MS + BOOT_TIMEOUT_MS,
  );

  it.runIf(USE_STAND_IN)(
    "the stand-in reaches the conductor and init restarts it when it exits",
    async () => {
      await waitFor(() => conductor.httpRequests.length > 0, { timeoutMs: BOOT_TIMEOUT_MS });
      expect(conductor.httpRequests[0]).toEqual({ url: "/v1/agent", userAgent: "anvil-agent-stand-in" });
      const text = await vm!.waitForSerial(/agent exited with status 1 after \d+s; restarting in 1s/, {
        timeoutMs: BOOT_TIMEOUT_MS,
        failOn: PANIC,
      });
      expect(text).toContain("anvil-agent (stand-in): conductor answered");
    },
    BOOT_TIMEOUT_MS,
  );
});
