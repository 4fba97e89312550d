import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import { labDown, labUp, REPO_ROOT } from "../../scripts/lab/lab.ts";
import type { RecordedEvent } from "../../scripts/lab/events.ts";
import type { LabNode, LabState } from "../../scripts/lab/state.ts";
import { withoutDisk } from "../../scripts/lab/vm-args.ts";
import { provision, provisionStates, startWalk, testImage, type Walk } from "../../scripts/lab/walk.ts";

/**
 * Issue 13's lab test, through the stock `baremetal` CLI: a node with two virtio disks and one NVMe disk
 * gets a software RAID-1 root by manual cleaning, keeps it through automated cleaning (as Ironic: the
 * metadata erase skips RAID members and erases the array), has a partition image deployed onto /dev/md0 that
 * boots from either disk, then a whole-disk image onto md0 that boots with its own grub.cfg, and at last a
 * manual clean that deletes the RAID and erases every disk by its own method, verified.
 */

const MARKER = "ANVIL-TEST-IMAGE-BOOTED anvil-test";
const MIB = 1024 * 1024;
const labs: string[] = [];

afterEach(async () => {
  for (const dir of labs.splice(0)) await labDown(dir);
});

async function up(name: string, conductorArgs: string[]): Promise<LabState> {
  const dir = join(REPO_ROOT, ".tmp", "e2e", name);
  labs.push(dir);
  return labUp({ dir, nodes: 1, port: 0, shape: "raid", conductorArgs });
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

function report(title: string, rows: Record<string, string | number>): void {
  const width = Math.max(...Object.keys(rows).map((k) => k.length));
  console.log(
    [`\n${title}`, ...Object.entries(rows).map(([k, v]) => `  ${k.padEnd(width)}  ${v}`)].join("\n"),
  );
}

/** Where the disks get a pattern before the erase: the start, the middle and the end of each. */
function patchesOf(disk: LabNode["disks"][number]): number[] {
  const size = disk.sizeGb * 1024 * MIB;
  return [0, Math.floor(size / 2 / MIB) * MIB, size - 16 * MIB];
}

/** Runs one qemu-io command on a qcow2 disk; a failed pattern check (exit 1) is an answer, not an error. */
async function qemuIo(disk: string, command: string, readOnly: boolean): Promise<string> {
  // -U: no lock needed (the VM is off, but a reader must not wait for a lingering QEMU)
  const flags = readOnly ? ["-r", "-U"] : [];
  const result = await exec("qemu-io", [...flags, "-f", "qcow2", "-c", command, disk], { timeoutMs: 60_000 });
  expect(result.code === 0 || /Pattern verification failed/.test(result.stdout), result.stderr).toBe(true);
  return result.stdout;
}

/** True when 16 MiB at `offset` all hold `byte`. */
async function holds(disk: string, at: { offset: number; byte: number }): Promise<boolean> {
  const out = await qemuIo(disk, `read -P ${at.byte} ${at.offset} 16M`, true);
  expect(out).toMatch(/^read 16777216\/16777216 bytes/m);
  return !/Pattern verification failed/.test(out);
}

/** How long each step took, from the conductor's step start/done events. */
function stepTimings(events: RecordedEvent[], kind: string): Record<string, string> {
  const rows: Record<string, string> = {};
  const started = new Map<string, number>();
  for (const event of events) {
    if (event.type !== "step" || event.kind !== kind) continue;
    const step = String(event.step);
    if (event.status === "start") started.set(step, Date.parse(event.at));
    else if (started.has(step)) rows[`${kind} ${step}`] = seconds(Date.parse(event.at) - started.get(step)!);
  }
  return rows;
}

async function countMarkers(walk: Walk): Promise<number> {
  return (await walk.probe.serial()).split(MARKER).length - 1;
}

async function waitForMarkers(walk: Walk, count: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await countMarkers(walk)) < count) {
    if (Date.now() > deadline) {
      throw new Error(
        `${MARKER} seen fewer than ${count} times:\n${(await walk.probe.serial()).slice(-3000)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** Waits until the VM has exited (the test image powers itself off after its marker). */
async function waitForVmExit(node: LabNode, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const power = (await readFile(join(node.dir, "bmc", "chassis", "power"), "utf8").catch(() => "")).trim();
    if (power === "0") return;
    if (Date.now() > deadline) throw new Error(`${node.name}'s VM still runs after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

interface MetadataEraseResult {
  devices: { device: string; method: string | null; skipped: string | null }[];
}

/** erase_devices_metadata's per-disk results of the last automated clean: erased devices, skipped ones. */
async function lastMetadataErase(walk: Walk): Promise<{ erased: string[]; skipped: string[] }> {
  const shown = await walk.bm.json(["node", "show", walk.node.name, "--fields", "driver_internal_info"]);
  const result = (shown.driver_internal_info as { erase_devices_metadata_result?: MetadataEraseResult })
    .erase_devices_metadata_result;
  const devices = result?.devices ?? [];
  return {
    erased: devices
      .filter((d) => d.method === "metadata")
      .map((d) => d.device)
      .sort(),
    skipped: devices
      .filter((d) => d.skipped !== null)
      .map((d) => d.device)
      .sort(),
  };
}

interface EraseResult {
  devices: {
    device: string;
    method: string | null;
    verified: boolean;
    bytes: number;
    seconds: number;
    skipped: string | null;
  }[];
}

describe("software RAID-1 and erasing in the lab, driven by the stock baremetal CLI", () => {
  it("RAID-1 by manual cleaning → kept by automated cleaning → partition image on md0 boots, also with a member gone → whole-disk image on md0 boots → delete RAID + erase_devices", async () => {
    const started = Date.now();
    // One zero pass for the overwrite (Ironic's shred_random_overwrite_iterations=0): a random pass under TCG
    // costs minutes per 5 GiB disk and tests nothing more.
    const state = await up("raid", ["--shred-random-overwrite-iterations", "0"]);
    const walk = await startWalk(state, { raid_interface: "agent" });
    try {
      const { bm, node, probe } = walk;
      const [first, second, nvme] = node.disks;
      if (!first || !second || !nvme) throw new Error("the raid node has three disks");
      expect([first.bus, second.bus, nvme.bus]).toEqual(["virtio", "virtio", "nvme"]);
      const shown = await bm.json(["node", "show", node.name, "--fields", "raid_interface"]);
      expect(shown.raid_interface).toBe("agent");

      await provision(walk, ["manage"]);

      // 1. target_raid_config over the two virtio disks (by serial), built by manual cleaning
      const target = {
        logical_disks: [
          {
            size_gb: "MAX",
            raid_level: "1",
            controller: "software",
            is_root_volume: true,
            physical_disks: [{ serial: first.serial }, { serial: second.serial }],
          },
        ],
      };
      await bm.run(["node", "set", node.name, "--target-raid-config", JSON.stringify(target)]);
      const raidSteps = [
        { interface: "raid", step: "delete_configuration" },
        { interface: "raid", step: "create_configuration" },
      ];
      const raidCleanMs = await provision(walk, ["clean", "--clean-steps", JSON.stringify(raidSteps)]);
      const afterRaid = await bm.json([
        ...["node", "show", node.name, "--fields", "provision_state", "power_state"],
        ...["raid_config", "target_raid_config", "last_error"],
      ]);
      expect(afterRaid).toMatchObject({
        provision_state: "manageable",
        power_state: "power off",
        last_error: null,
        target_raid_config: target,
        raid_config: {
          logical_disks: [
            expect.objectContaining({
              device: "/dev/md0",
              raid_level: "1",
              physical_disks: ["/dev/vda", "/dev/vdb"],
              root_device_hint: { name: "/dev/md0" },
            }),
          ],
        },
      });

      // provide: automated cleaning (erase_devices_metadata) keeps the RAID and erases md0, as Ironic
      const provideMs = await provision(walk, ["provide"]);
      const provided = await bm.json([
        "node",
        "show",
        node.name,
        "--fields",
        "provision_state",
        "raid_config",
      ]);
      expect(provided).toMatchObject({
        provision_state: "available",
        raid_config: { logical_disks: [expect.objectContaining({ device: "/dev/md0" })] },
      });
      expect(await lastMetadataErase(walk)).toEqual({
        erased: ["/dev/md0", "/dev/nvme0n1"],
        skipped: ["/dev/vda", "/dev/vdb"],
      });

      // deploy the partition image: the agent writes it onto md0 and installs GRUB on both holders
      const image = await testImage(state, "anvil-test.partition.raw");
      await bm.run([
        ...["node", "set", node.name],
        ...["--instance-info", `image_source=${image.source}`],
        ...["--instance-info", "image_os_hash_algo=sha256"],
        ...["--instance-info", `image_os_hash_value=${image.sha256}`],
        ...["--instance-info", "image_disk_format=raw"],
        ...["--instance-info", "image_type=partition"],
        ...["--instance-info", "root_gb=1"],
      ]);
      const deployMs = await provision(walk, ["deploy"]);
      await waitForMarkers(walk, 1, 300_000);
      const deployed = await bm.json(["node", "show", node.name, "--fields", "driver_internal_info"]);
      const written = (
        deployed.driver_internal_info as { deploy_result?: { root_device?: { name: string } } }
      ).deploy_result;
      expect(written?.root_device?.name).toBe("/dev/md0");
      const deploySteps = walk.events
        .filter((e) => e.type === "step" && e.kind === "deploy" && e.status === "done")
        .map((e) => String(e.step));
      expect(deploySteps).toEqual(
        expect.arrayContaining(["deploy.write_image", "deploy.install_bootloader", "deploy.boot_instance"]),
      );
      expect(deploySteps.indexOf("deploy.install_bootloader")).toBeGreaterThan(
        deploySteps.indexOf("deploy.write_image"),
      );

      // 2. a member dies: the VM restarts without the first virtio disk and still boots from the second
      await waitForVmExit(node, 120_000);
      await bm.run(["node", "power", "off", node.name]);
      const argsFile = join(node.dir, "vm", "qemu.args");
      const fullArgs = (await readFile(argsFile, "utf8")).split("\n").filter((line) => line !== "");
      await writeFile(argsFile, withoutDisk(fullArgs, first.file).join("\n") + "\n");
      const degradedStarted = Date.now();
      try {
        await bm.run(["node", "power", "on", node.name]);
        await waitForMarkers(walk, 2, 300_000);
      } finally {
        await waitForVmExit(node, 120_000).catch(() => undefined);
        await bm.run(["node", "power", "off", node.name]);
        await writeFile(argsFile, fullArgs.join("\n") + "\n");
      }
      const degradedMs = Date.now() - degradedStarted;
      const starts = await probe.vmStarts();
      expect(starts.at(-1)?.order).toBe("c");

      // 3. undeploy cleans automatically (md0 assembled and erased, the RAID kept); a whole-disk image onto md0
      // then boots through GRUB on the holders with the image's own grub.cfg (IPA's software RAID deploy)
      const undeployMs = await provision(walk, ["undeploy"]);
      expect(await lastMetadataErase(walk)).toEqual({
        erased: ["/dev/md0", "/dev/nvme0n1"],
        skipped: ["/dev/vda", "/dev/vdb"],
      });
      const wholeDisk = await testImage(state, "anvil-test.linux-disk.raw");
      // undeploy cleared instance_info, as Ironic's does: the whole-disk image is set from scratch
      await bm.run([
        ...["node", "set", node.name],
        ...["--instance-info", `image_source=${wholeDisk.source}`],
        ...["--instance-info", "image_os_hash_algo=sha256"],
        ...["--instance-info", `image_os_hash_value=${wholeDisk.sha256}`],
        ...["--instance-info", "image_disk_format=raw"],
      ]);
      const wholeDiskMs = await provision(walk, ["deploy"]);
      await waitForMarkers(walk, 3, 300_000);
      expect(await probe.serial()).toMatch(/ANVIL-TEST-IMAGE-CMDLINE[^\n]*anvil\.grub_cfg=image/);
      await waitForVmExit(node, 120_000);

      // 4. erase_devices on disks holding a pattern, after delete_configuration (cleaning keeps RAID members):
      // NVMe by format/sanitize, virtio by discard or overwrite
      await provision(walk, ["undeploy"]);
      await provision(walk, ["manage"]);
      for (const disk of node.disks) {
        for (const offset of patchesOf(disk)) {
          await qemuIo(disk.file, `write -P 0xab ${offset} 16M`, false);
          expect(await holds(disk.file, { offset, byte: 0xab })).toBe(true);
        }
      }
      const eraseMs = await provision(walk, [
        "clean",
        "--clean-steps",
        JSON.stringify([
          { interface: "raid", step: "delete_configuration" },
          { interface: "deploy", step: "erase_devices" },
        ]),
      ]);
      const erased = await bm.json([
        ...["node", "show", node.name, "--fields", "provision_state", "power_state", "last_error"],
        "driver_internal_info",
      ]);
      expect(erased).toMatchObject({
        provision_state: "manageable",
        power_state: "power off",
        last_error: null,
      });
      const result = (erased.driver_internal_info as { erase_devices_result?: EraseResult })
        .erase_devices_result;
      const byDevice = new Map(result?.devices.map((d) => [d.device, d]));
      expect([...byDevice.keys()].sort()).toEqual(["/dev/nvme0n1", "/dev/vda", "/dev/vdb"]);
      expect(byDevice.get("/dev/nvme0n1")).toMatchObject({
        method: expect.stringMatching(/^nvme_(format|sanitize)_/) as unknown,
        verified: true,
        skipped: null,
      });
      for (const name of ["/dev/vda", "/dev/vdb"]) {
        expect(byDevice.get(name)).toMatchObject({
          method: expect.stringMatching(/^(discard|write_zeroes|overwrite)$/) as unknown,
          verified: true,
          skipped: null,
        });
      }
      // from the host, the VM stopped: no pattern left anywhere it was written; discard and the overwrite's
      // last pass leave zeros (a firmware erase may leave any content, so the NVMe disk only lost its pattern)
      for (const disk of node.disks) {
        for (const offset of patchesOf(disk)) {
          expect(await holds(disk.file, { offset, byte: 0xab })).toBe(false);
          if (disk.bus === "virtio") expect(await holds(disk.file, { offset, byte: 0 })).toBe(true);
        }
      }

      expect(provisionStates(walk.events)).toEqual([
        ...["verifying", "manageable"],
        ...["cleaning", "clean wait", "cleaning", "manageable"],
        ...["cleaning", "clean wait", "cleaning", "available"],
        ...["deploying", "wait call-back", "deploying", "active"],
        ...["deleting", "cleaning", "clean wait", "cleaning", "available"],
        ...["deploying", "wait call-back", "deploying", "active"],
        ...["deleting", "cleaning", "clean wait", "cleaning", "available"],
        "manageable",
        ...["cleaning", "clean wait", "cleaning", "manageable"],
      ]);
      const actions = await probe.powerActions();
      report("lab e2e: software RAID-1, a dead member, erase_devices (QEMU TCG)", {
        "manual clean: delete + create RAID-1 (manageable → manageable)": seconds(raidCleanMs),
        ...stepTimings(walk.events, "clean"),
        "provide: automated clean, RAID kept (manageable → available)": seconds(provideMs),
        "deploy of the partition image onto md0 (available → active)": seconds(deployMs),
        ...stepTimings(walk.events, "deploy"),
        "power on without the first member → marker": seconds(degradedMs),
        "undeploy: automated clean, RAID kept (active → available)": seconds(undeployMs),
        "deploy of the whole-disk image onto md0 (available → active)": seconds(wholeDiskMs),
        "manual clean: delete RAID + erase_devices (manageable → manageable)": seconds(eraseMs),
        ...Object.fromEntries(
          (result?.devices ?? []).map((d) => [
            `  ${d.device}`,
            `${d.method} verified=${d.verified} ${(d.bytes / 1024 ** 3).toFixed(1)} GiB in ${d.seconds.toFixed(1)} s`,
          ]),
        ),
        "VM starts (on/off/reset)": `${actions.on}/${actions.off}/${actions.reset}`,
        total: seconds(Date.now() - started),
      });
    } finally {
      walk.stopEvents();
    }
  });
});
