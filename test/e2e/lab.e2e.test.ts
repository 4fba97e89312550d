import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import { alive } from "../../scripts/lab/daemon.ts";
import { labDown, labUp, startLabConductor, stopLabConductor, REPO_ROOT } from "../../scripts/lab/lab.ts";
import type { LabUpOptions } from "../../scripts/lab/lab.ts";
import { NIC_MODELS } from "../../scripts/lab/vm-args.ts";
import { baremetal } from "../../scripts/lab/baremetal.ts";
import type { PowerActions } from "../../scripts/lab/probe.ts";
import type { LabNode, LabState } from "../../scripts/lab/state.ts";
import {
  provision,
  provisionStates,
  setInstanceImage,
  startToAgent,
  startWalk,
  testImage,
} from "../../scripts/lab/walk.ts";

const MARKER = "ANVIL-TEST-IMAGE-BOOTED anvil-test";
const labs: string[] = [];

async function up(
  name: string,
  conductorArgs: string[] = [],
  hardware: Pick<LabUpOptions, "nicModel" | "rootBus" | "lldp"> = {},
): Promise<LabState> {
  const dir = join(REPO_ROOT, ".tmp", "e2e", name);
  labs.push(dir);
  return labUp({ dir, nodes: 1, port: 0, conductorArgs, ...hardware });
}

afterEach(async () => {
  for (const dir of labs.splice(0)) await labDown(dir);
});

/** Power actions between two snapshots. */
const delta = (after: PowerActions, before: PowerActions): PowerActions => ({
  on: after.on - before.on,
  off: after.off - before.off,
  reset: after.reset - before.reset,
  softOff: after.softOff - before.softOff,
});

/**
 * What a restart case's conductors and BMC did, for a failure message: each conductor's warnings, errors and
 * state changes (both processes append to one log), then the BMC hook's power actions.
 */
async function restartDiagnosis(state: LabState, node: LabNode): Promise<string> {
  const lines = (await readFile(join(state.dir, "conductor.log"), "utf8").catch(() => "")).split("\n");
  const kept: string[] = [];
  for (const line of lines) {
    let entry: Record<string, unknown>;
    try {
      entry = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue;
    }
    const msg = String(entry.msg ?? "");
    if (Number(entry.level) < 40 && !/state changed|agent (dis)?connected|took over|listening/.test(msg))
      continue;
    const detail = [entry.from && `${String(entry.from)} → ${String(entry.to)}`, entry.error, entry.err]
      .filter(Boolean)
      .map((part) => (typeof part === "string" ? part : JSON.stringify(part)).slice(0, 300));
    kept.push(
      `${new Date(Number(entry.time)).toISOString()} pid ${String(entry.pid)} ${msg} ${detail.join(" ")}`,
    );
  }
  const hook = await readFile(join(node.dir, "vm", "hook.log"), "utf8").catch(() => "(no hook.log)");
  return `conductor log:\n${kept.join("\n")}\nBMC hook:\n${hook}`;
}

/** Writes a pattern over the first MiB of a powered-off node's disk (qemu-io edits the qcow2 in place). */
async function scribble(disk: string): Promise<void> {
  const result = await exec("qemu-io", ["-f", "qcow2", "-c", "write -P 0xab 0 1M", disk], {
    timeoutMs: 30_000,
  });
  expect(result.code, result.stderr).toBe(0);
}

/** True when the first MiB of the disk reads as zeroes; throws when the disk cannot be read at all. */
async function zeroed(disk: string): Promise<boolean> {
  // -r -U: read-only and without taking QEMU's lock (the node may be running again)
  const result = await exec("qemu-io", ["-r", "-U", "-f", "qcow2", "-c", "read -P 0 0 1M", disk], {
    timeoutMs: 30_000,
  });
  if (!/^read 1048576\/1048576 bytes/m.test(result.stdout)) throw new Error(`qemu-io: ${result.stderr}`);
  return !/Pattern verification failed/.test(result.stdout);
}

function report(title: string, rows: Record<string, string | number>): void {
  const width = Math.max(...Object.keys(rows).map((k) => k.length));
  console.log(
    [`\n${title}`, ...Object.entries(rows).map(([k, v]) => `  ${k.padEnd(width)}  ${v}`)].join("\n"),
  );
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** Powers a lab VM on into PXE through its BMC, as an operator racking a machine would (password via env). */
async function powerOnByBmc(node: LabNode): Promise<void> {
  const password = (await readFile(node.passwordFile, "utf8")).trim();
  const base = ["-I", "lanplus", "-H", "127.0.0.1", "-p", String(node.bmcPort), "-U", node.username, "-E"];
  for (const command of [
    ["chassis", "bootdev", "pxe"],
    ["chassis", "power", "on"],
  ]) {
    const result = await exec("ipmitool", [...base, ...command], {
      env: { IPMI_PASSWORD: password },
      timeoutMs: 30_000,
    });
    expect(result.code, result.stderr).toBe(0);
  }
}

/** Polls until `probe` answers something other than undefined. @throws Error naming `what` on timeout */
async function poll<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

describe("the virtual lab, driven by the stock baremetal CLI", () => {
  it("enroll → manage → inspect → provide → deploy (the VM boots the image) → undeploy → available, on a vmxnet3 NIC", async () => {
    const started = Date.now();
    // A NIC beyond virtio: the ramdisk's vmxnet3 driver carries the whole walk (PXE through the NIC's iPXE
    // ROM, the agent's link, the image download). A root disk behind megasas is inspected, written and booted
    // in test/integration/ramdisk.test.ts; here (a qcow2 with discard=unmap) QEMU's megasas answered the
    // ramdisk with "Internal target failure", so the lab's root disk stays on virtio.
    // A second NIC is cabled to the lab's LLDP switch (lldpd on a tap): inspection learns the cabling.
    const state = await up("lifecycle", [], { nicModel: "vmxnet3", lldp: true });
    const walk = await startWalk(state);
    try {
      const { bm, node, probe } = walk;
      const uuid = String((await bm.json(["node", "show", node.name])).uuid);
      const disk = node.disks[0]?.file ?? "";

      // manage: the conductor checks the BMC credentials (power status over IPMI)
      await provision(walk, ["manage"]);
      expect(await bm.node(node.name)).toMatchObject({
        provision_state: "manageable",
        power_state: "power off",
      });

      // inspect: the VM PXE-boots the ramdisk; the agent's inventory fills properties and matches the VM
      const inspectMs = await provision(walk, ["inspect"]);
      const shown = await bm.json(["node", "show", node.name, "--fields", "properties"]);
      expect(shown.properties).toMatchObject({
        cpus: node.vcpus,
        memory_mb: node.memoryMb,
        cpu_arch: "x86_64",
        local_gb: 4,
      });
      const inventory = (await (
        await fetch(`${state.conductor?.url}/v1/nodes/${uuid}/inventory`, {
          headers: { "X-OpenStack-Ironic-API-Version": "1.81" },
        })
      ).json()) as {
        inventory: {
          cpu: { count: number };
          memory: { physical_mb: number };
          disks: { name: string; serial: string | null; size: number; hctl: string | null }[];
          interfaces: { name: string; mac_address: string; driver: string | null }[];
        };
      };
      expect(inventory.inventory.cpu.count).toBe(node.vcpus);
      expect(inventory.inventory.memory.physical_mb).toBe(node.memoryMb);
      expect(inventory.inventory.disks.map((d) => [d.serial, d.size]).sort()).toEqual(
        node.disks.map((d) => [d.serial, d.sizeGb * 1024 ** 3]).sort(),
      );
      expect(inventory.inventory.interfaces.map((i) => i.mac_address)).toContain(node.mac);
      // the emulated NIC, as the agent saw it
      expect(inventory.inventory.interfaces.find((i) => i.mac_address === node.mac)?.driver).toBe(
        NIC_MODELS.vmxnet3.driver,
      );
      // LLDP: what lldpd announced on the switch port fills that NIC's port (Ironic's local-link-connection
      // hook) and plugin_data's parsed_lldp; the PCI and NUMA collectors report the VM's devices and node
      const lldp = state.lldp;
      const switchNic = inventory.inventory.interfaces.find((i) => i.mac_address === node.switchNicMac);
      expect(lldp).not.toBeNull();
      expect(switchNic).toBeDefined();
      const ports = await bm.json(["port", "list", "--node", node.name, "--long"]);
      const switchPort = (ports as unknown as Record<string, unknown>[]).find(
        (p) => p.Address === node.switchNicMac,
      );
      expect(switchPort?.["Local Link Connection"]).toEqual({
        switch_id: lldp?.ports[0]?.mac,
        port_id: lldp?.ports[0]?.portId,
        switch_info: lldp?.systemName,
      });
      const pluginData = (inventory as unknown as { plugin_data: Record<string, unknown> }).plugin_data;
      expect(pluginData.parsed_lldp).toMatchObject({
        [switchNic?.name ?? "?"]: {
          switch_chassis_id: lldp?.ports[0]?.mac,
          switch_port_id: lldp?.ports[0]?.portId,
          switch_port_description: lldp?.ports[0]?.description,
          switch_system_name: lldp?.systemName,
        },
      });
      const pci = pluginData.pci_devices as { vendor_id: string; product_id: string }[];
      expect(pci).toContainEqual(expect.objectContaining({ vendor_id: "15ad", product_id: "07b0" })); // vmxnet3
      expect(pluginData.numa_topology).toMatchObject({ ram: [{ numa_node: 0 }] });

      // provide: automated cleaning erases the disks' metadata
      await scribble(disk);
      expect(await zeroed(disk)).toBe(false);
      await provision(walk, ["provide"]);
      expect(await zeroed(disk)).toBe(true);
      expect(await bm.node(node.name)).toMatchObject({
        provision_state: "available",
        power_state: "power off",
      });

      // deploy: the ramdisk writes the qcow2 image and a config drive, then the node boots its disk
      await setInstanceImage(walk, await testImage(state));
      const beforeDeploy = await probe.powerActions();
      const deployMs = await provision(walk, [
        "deploy",
        "--config-drive",
        JSON.stringify({ meta_data: { uuid, hostname: node.name } }),
      ]);
      const deployActions = delta(await probe.powerActions(), beforeDeploy);
      const console_ = await probe.waitForSerial(
        new RegExp(`${MARKER}[\\s\\S]*ANVIL-TEST-IMAGE-CONFIGDRIVE`),
        180_000,
      );
      const bootedMs = Date.now() - started;
      expect(console_).toMatch(new RegExp(`ANVIL-TEST-IMAGE-CONFIGDRIVE \\S+ uuid=${uuid}`));
      expect(deployActions).toEqual({ on: 2, off: 1, reset: 0, softOff: 0 }); // into the ramdisk, into the image

      // undeploy: cleaning again, then available
      await provision(walk, ["undeploy"]);
      expect(await bm.node(node.name)).toMatchObject({ provision_state: "available", last_error: null });
      expect(provisionStates(walk.events)).toEqual([
        "verifying",
        "manageable",
        "inspecting",
        "inspect wait",
        "inspecting",
        "manageable",
        "cleaning",
        "clean wait",
        "cleaning",
        "available",
        "deploying",
        "wait call-back",
        "deploying",
        "active",
        "deleting",
        "cleaning",
        "clean wait",
        "cleaning",
        "available",
      ]);

      const all = await probe.powerActions();
      const toAgent = startToAgent(await probe.vmStarts(), walk.events);
      expect(toAgent).toHaveLength(4); // network boots: inspect, clean, deploy, clean
      report("lab e2e: one node from enroll to active and back (QEMU TCG)", {
        "power on → agent connected": toAgent.map(seconds).join(", "),
        "inspect (manageable → manageable)": seconds(inspectMs),
        "deploy (available → active)": seconds(deployMs),
        "deploy power actions (on/off/reset)": `${deployActions.on}/${deployActions.off}/${deployActions.reset} → ${deployActions.on} boots`,
        "all power actions (on/off/reset)": `${all.on}/${all.off}/${all.reset}`,
        "enroll → image booted": seconds(bootedMs),
        total: seconds(Date.now() - started),
      });
    } finally {
      walk.stopEvents();
    }
  });

  it("fast track: after inspection and cleaning the deploy needs one power cycle (Ironic needs two)", async () => {
    const state = await up("fast-track", ["--fast-track"]);
    const walk = await startWalk(state);
    try {
      const { bm, node, probe } = walk;
      await provision(walk, ["manage"]);
      await provision(walk, ["inspect"]);
      // the agent stays: the node is still on after inspection and cleaning
      expect(await bm.node(node.name)).toMatchObject({
        provision_state: "manageable",
        power_state: "power on",
      });
      await provision(walk, ["provide"]);
      expect(await bm.node(node.name)).toMatchObject({
        provision_state: "available",
        power_state: "power on",
      });
      const bootsBefore = (await probe.powerActions()).on;
      expect(bootsBefore).toBe(1); // one ramdisk boot for inspection and cleaning together

      await setInstanceImage(walk, await testImage(state));
      const before = await probe.powerActions();
      const statesBefore = provisionStates(walk.events).length;
      const deployMs = await provision(walk, ["deploy"]);
      const actions = delta(await probe.powerActions(), before);
      await probe.waitForSerial(new RegExp(MARKER), 180_000);
      expect(actions).toEqual({ on: 1, off: 1, reset: 0, softOff: 0 }); // only the boot into the image
      expect(provisionStates(walk.events).slice(statesBefore)).toEqual(["deploying", "active"]);
      report("lab e2e: fast-track deploy", {
        "deploy (available → active)": seconds(deployMs),
        "deploy power cycles": `${actions.on} (Ironic without fast track: 2)`,
        "ramdisk boots for inspect + clean + deploy": String(bootsBefore),
      });
    } finally {
      walk.stopEvents();
    }
  });

  it("a conductor restart during wait call-back: the deploy resumes, fails cleanly on a bad checksum, and its logs are kept", async () => {
    let state = await up("restart");
    const walk = await startWalk(state);
    try {
      const { bm, node, probe } = walk;
      await bm.run(["node", "set", node.name, "--no-automated-clean"]);
      await provision(walk, ["manage"]);
      await provision(walk, ["provide"]);
      // A wrong checksum: the resumed deploy writes the image and must then fail, with the agent still connected,
      // so the conductor collects the ramdisk's logs (issue 27's "a failed lab deploy's logs through the API").
      await setInstanceImage(walk, { ...(await testImage(state)), sha256: "0".repeat(64) });
      await bm.run(["node", "deploy", node.name]);
      const deadline = Date.now() + 120_000;
      while ((await bm.node(node.name)).provision_state !== "wait call-back") {
        if (Date.now() > deadline) throw new Error("never reached wait call-back");
        await new Promise((r) => setTimeout(r, 500));
      }
      // Down once the ramdisk is loaded (iPXE needs the conductor to fetch it) and its kernel starts, about
      // 5 s under TCG before the agent dials (at /init's first line it was 2 s: a loaded CI could stop the
      // conductor after the agent's hello); back once the agent has found the conductor gone and is redialling.
      await probe.waitForSerial(/Linux version/, 180_000);
      state = await stopLabConductor(state);
      // the agent logs JSON, or pretty lines on a console that is a terminal
      await probe.waitForSerial(/agent starting[\s\S]*link down; redialling/, 180_000);
      state = await startLabConductor(state);
      const bm2 = baremetal(state.conductor?.url ?? ""); // same port, a new process
      let last = await bm2.node(node.name);
      const settle = Date.now() + 600_000;
      while (!["active", "deploy failed"].includes(last.provision_state)) {
        if (Date.now() > settle) throw new Error(`still ${last.provision_state} after 10 min`);
        await new Promise((r) => setTimeout(r, 2000));
        last = await bm2.node(node.name);
      }
      const pid = Number(await readFile(join(node.dir, "vm", "qemu.pid"), "utf8").catch(() => "0"));
      const outcome = {
        provision_state: last.provision_state,
        mismatch: /mismatch/i.test(String(last.last_error)),
        power_state: last.power_state,
        vm_running: alive(pid),
      };
      // seen once in CI: "deploy failed" but "power on"; the message says which conductor did what
      expect(outcome, `${String(last.last_error)}\n${await restartDiagnosis(state, node)}`).toEqual({
        provision_state: "deploy failed",
        mismatch: true,
        power_state: "power off",
        vm_running: false,
      });

      // the failed deploy's logs, collected before the power off, read through the API
      const api = `${state.conductor?.url ?? ""}/v1/nodes/${node.name}/logs`;
      const listed = (await (await fetch(api)).json()) as {
        logs: { id: string; reason: string; size: number }[];
      };
      const log = listed.logs.find((entry) => entry.reason === "deploy failed");
      expect(log, JSON.stringify(listed)).toBeDefined();
      const text = await (await fetch(`${api}/${encodeURIComponent(log?.id ?? "")}?format=text`)).text();
      expect(text).toContain("==> agent.log <==");
      expect(text).toMatch(/sha256 mismatch/);
      expect(text).toContain("==> dmesg.txt <==");
      expect(text).toMatch(/Linux version/);
      report("lab e2e: conductor restarted during wait call-back", {
        outcome: last.provision_state,
        power_state: String(last.power_state),
        last_error: String(last.last_error),
        "deploy log": `${log?.id ?? ""} (${log?.size ?? 0} bytes)`,
      });
    } finally {
      walk.stopEvents();
    }
  });

  it("discovery: an unknown QEMU node is enrolled, inspected and given its class and traits by an API rule", async () => {
    const state = await up("discovery", ["--auto-discovery-enabled", "--auto-discovery-driver", "ipmi"]);
    const url = state.conductor?.url ?? "";
    const node = state.nodes[0]!;
    const V = { "X-OpenStack-Ironic-API-Version": "1.96", "Content-Type": "application/json" };
    const get = async (path: string): Promise<{ status: number; body: Record<string, unknown> }> => {
      const r = await fetch(`${url}${path}`, { headers: V });
      return { status: r.status, body: (await r.json()) as Record<string, unknown> };
    };
    const rule = await fetch(`${url}/v1/inspection_rules`, {
      method: "POST",
      headers: V,
      body: JSON.stringify({
        description: "discovered one-CPU lab machines",
        conditions: [{ op: "eq", args: { values: ["{inventory[cpu][count]}", String(node.vcpus)] } }],
        actions: [
          { op: "set-attribute", args: { path: "resource_class", value: "lab-discovered" } },
          { op: "add-trait", args: { name: "CUSTOM_LAB_DISCOVERED" } },
        ],
      }),
    });
    expect(rule.status, await rule.clone().text()).toBe(201);
    expect((await get("/v1/nodes")).body.nodes).toEqual([]); // the VM's MAC is no node's

    const started = Date.now();
    await powerOnByBmc(node);
    const uuid = await poll("the discovered node", 300_000, async () => {
      const ports = (await get(`/v1/ports?address=${node.mac}&fields=node_uuid`)).body.ports as {
        node_uuid: string;
      }[];
      return ports[0]?.node_uuid;
    });
    const enrolledMs = Date.now() - started;
    const found = await poll("the inspection rule's result", 300_000, async () => {
      const shown = (await get(`/v1/nodes/${uuid}`)).body;
      return shown.resource_class === null && shown.last_error === null ? undefined : shown;
    });
    const inspectedMs = Date.now() - started;
    expect(found).toMatchObject({
      provision_state: "enroll",
      driver: "ipmi",
      resource_class: "lab-discovered",
      last_error: null,
      properties: { cpus: node.vcpus, cpu_arch: "x86_64" },
    });
    expect((await get(`/v1/nodes/${uuid}/traits`)).body.traits).toEqual(["CUSTOM_LAB_DISCOVERED"]);
    const inventory = (await get(`/v1/nodes/${uuid}/inventory`)).body as {
      inventory: { interfaces: { mac_address: string; driver?: string }[]; disks: unknown[] };
      plugin_data: Record<string, unknown>;
    };
    expect(inventory.plugin_data.auto_discovered).toBe(true);
    expect(inventory.inventory.interfaces.map((i) => i.mac_address)).toContain(node.mac);
    expect(inventory.inventory.disks.length).toBeGreaterThan(0);
    const ports = (await get(`/v1/ports?node_uuid=${uuid}&detail=true`)).body.ports as {
      address: string;
      pxe_enabled: boolean;
    }[];
    expect(ports.map((p) => [p.address, p.pxe_enabled])).toEqual([[node.mac, true]]);
    // then the agent powers the machine off: QEMU exits, the BMC reads off
    await poll("the discovered VM to power off", 120_000, async () =>
      (await readFile(join(node.dir, "bmc", "chassis", "power"), "utf8").catch(() => "")).trim() === "0"
        ? true
        : undefined,
    );
    expect((await get("/v1/nodes")).body.nodes).toHaveLength(1);
    // iPXE found no script for its MAC and booted the discovery script the conductor wrote
    expect(await readFile(join(node.dir, "vm", "serial.log"), "utf8")).toMatch(/discovery\.ipxe\.\.\. ok/);
    report("lab e2e: auto-discovery of an unknown VM", {
      "power on → node enrolled": seconds(enrolledMs),
      "power on → inspected, rule applied": seconds(inspectedMs),
      "power on → VM off": seconds(Date.now() - started),
    });
  });
});
