import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";
import { RedfishConnections, RedfishError } from "../../conductor/drivers/redfish/client.ts";
import { RedfishInspect } from "../../conductor/drivers/redfish/inspect.ts";
import { RedfishManagement } from "../../conductor/drivers/redfish/management.ts";
import { RedfishPower } from "../../conductor/drivers/redfish/power.ts";
import { InventorySchema } from "../../shared/inventory.ts";
import { MemoryMachine } from "../../scripts/lab/redfish/machine.ts";
import {
  startRedfishBmc,
  type RedfishBmc,
  type RedfishBmcOptions,
} from "../../scripts/lab/redfish/server.ts";
import { selfSignedCert } from "../helpers/tls.ts";

const FAST = { backoffMs: 1, timeoutMs: 5000 };

function nodeFor(bmc: RedfishBmc, info: Record<string, unknown> = {}): DriverNode {
  return {
    uuid: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
    name: "n1",
    driver_info: {
      redfish_address: bmc.url,
      redfish_system_id: "/redfish/v1/Systems/node-1",
      redfish_username: "admin",
      redfish_password: "s3cret",
      ...info,
    },
    properties: { capabilities: "boot_mode:uefi" },
    instance_info: {},
    driver_internal_info: {},
    ports: [],
  };
}

describe("the redfish driver against the lab's in-memory BMC", () => {
  const bmcs: RedfishBmc[] = [];
  const connections: RedfishConnections[] = [];
  afterEach(async () => {
    for (const c of connections.splice(0)) await c.close();
    for (const b of bmcs.splice(0)) await b.stop();
  });

  async function setup(options: Partial<RedfishBmcOptions> = {}, machine = new MemoryMachine()) {
    const bmc = await startRedfishBmc({
      password: "s3cret",
      systems: [
        { id: "node-1", machine, macs: ["52:54:00:AA:00:01", "52-54-00-aa-00-02"], cpus: 4, memoryMiB: 4096 },
      ],
      ...options,
    });
    bmcs.push(bmc);
    const conn = new RedfishConnections(FAST);
    connections.push(conn);
    const management = new RedfishManagement({ connections: conn, postRetryDelayMs: 1 });
    const power = new RedfishPower({
      connections: conn,
      management,
      pollIntervalMs: 5,
      powerTimeoutMs: 2000,
    });
    return { bmc, machine, conn, management, power, node: nodeFor(bmc) };
  }

  it("powers on and off with the reset types Ironic uses, over one session", async () => {
    const { bmc, machine, power, node } = await setup();
    expect(await power.getPowerState(node)).toBe("power off");
    await power.setPowerState(node, "power on");
    expect(machine.state).toBe("On");
    await power.setPowerState(node, "power off", { soft: true });
    await power.setPowerState(node, "power on");
    await power.setPowerState(node, "power off");
    expect(machine.log.map((l) => l.type)).toEqual(["On", "GracefulShutdown", "On", "ForceOff"]);
    expect(bmc.requests.filter((r) => r === "POST /redfish/v1/SessionService/Sessions")).toHaveLength(1);
  });

  it("drives each node's own system where nodes share a BMC and its credentials", async () => {
    const first = new MemoryMachine();
    const second = new MemoryMachine();
    const { machine, power, node } = await setup(
      {
        systems: [
          { id: "node-1", machine: first },
          { id: "node-2", machine: second },
        ],
      },
      first,
    );
    const other = nodeFor(bmcs[0]!, { redfish_system_id: "/redfish/v1/Systems/node-2" });
    // the first node's call makes the shared client; the second node must still reach node-2
    expect(await power.getPowerState(node)).toBe("power off");
    await power.setPowerState(other, "power on");
    expect(second.state).toBe("On");
    expect(machine.state).toBe("Off");
    expect(await power.getPowerState(node)).toBe("power off");
    expect(await power.getPowerState(other)).toBe("power on");
  });

  it("reboots hard as off then on, soft as GracefulRestart, and waits out PoweringOn", async () => {
    const machine = new MemoryMachine({ power: "On", settleMs: 30 });
    const { power, node } = await setup({}, machine);
    await power.reboot(node);
    expect(machine.state).toBe("On");
    await power.reboot(node, { soft: true });
    expect(machine.log.map((l) => l.type)).toEqual(["ForceOff", "On", "GracefulRestart"]);
  });

  it("reboots a node with disable_power_off (1.95) by ForceRestart, never ForceOff", async () => {
    const machine = new MemoryMachine({ power: "On", settleMs: 30 });
    const { power, node } = await setup({}, machine);
    await power.reboot({ ...node, disable_power_off: true });
    expect(machine.state).toBe("On");
    expect(machine.log.map((l) => l.type)).toEqual(["ForceRestart"]);
  });

  it("follows a task monitor until the task completes", async () => {
    const { bmc, power, node } = await setup({ misbehave: { resetTaskPolls: 2 } });
    await power.setPowerState(node, "power on");
    expect(bmc.requests.filter((r) => r.startsWith("GET /redfish/v1/TaskService/Tasks/"))).toHaveLength(3);
  });

  it("retries 503 answers with backoff", async () => {
    const { bmc, power, node } = await setup({ misbehave: { unavailable: 2 } });
    expect(await power.getPowerState(node)).toBe("power off");
    expect(bmc.misbehave.unavailable).toBe(0);
  });

  it("logs in again when the BMC forgets the session, and deletes it on close", async () => {
    const { bmc, conn, power, node } = await setup();
    await power.getPowerState(node);
    bmc.sessions.clear();
    await power.getPowerState(node);
    expect(bmc.requests.filter((r) => r === "POST /redfish/v1/SessionService/Sessions")).toHaveLength(2);
    expect(bmc.sessions.size).toBe(1);
    await conn.close();
    expect(bmc.sessions.size).toBe(0);
  });

  it("falls back to basic authentication where sessions are refused (auto)", async () => {
    const { bmc, power, node } = await setup({ misbehave: { noSessions: true } });
    expect(await power.getPowerState(node)).toBe("power off");
    expect(bmc.sessions.size).toBe(0);
    const strict = nodeFor(bmc, { redfish_auth_type: "session" });
    await expect(power.getPowerState(strict)).rejects.toThrow(/refused to create a session/);
  });

  it("reports bad credentials in Ironic-like words, without the password", async () => {
    const { power, bmc } = await setup();
    const wrong = nodeFor(bmc, { redfish_password: "wrong-password" });
    const failure = await power.getPowerState(wrong).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(RedfishError);
    expect(String(failure)).toMatch(/authentication failed/);
    expect(String(failure)).not.toContain("wrong-password");
  });

  it("sets the boot device once and persistently with the node's boot mode", async () => {
    const { bmc, management, power, node, machine } = await setup();
    await management.setBootDevice(node, { device: "pxe", persistent: false });
    expect(await management.getBootDevice(node)).toEqual({ boot_device: "pxe", persistent: false });
    await power.setPowerState(node, "power on");
    expect(machine.log.at(-1)).toEqual({ type: "On", bootSource: "Pxe" });
    // a one-time override is consumed by the boot
    expect(await management.getBootDevice(node)).toEqual({ boot_device: null, persistent: null });
    await management.setBootDevice(node, { device: "disk", persistent: true });
    expect(await management.getBootDevice(node)).toEqual({ boot_device: "disk", persistent: true });
    expect(bmc.systems.get("node-1")!.boot.mode).toBe("UEFI");
    await expect(management.setBootDevice(node, { device: "safe", persistent: false })).rejects.toThrow(
      /does not support boot device safe/,
    );
  });

  it("sets boot mode, indicator LED, secure boot and sends an NMI", async () => {
    const { bmc, management, node, machine } = await setup();
    await management.setBootMode(node, "bios");
    expect(await management.getBootMode(node)).toBe("bios");
    await expect(management.setSecureBoot(node, true)).rejects.toThrow(/HTTP 409/);
    await management.setBootMode(node, "uefi");
    await management.setSecureBoot(node, true);
    expect(await management.getSecureBoot(node)).toBe(true);
    const system = { component: "system" as const, name: bmc.systems.get("node-1")!.spec.uuid! };
    await management.setIndicatorState(node, { ...system, state: "blinking" });
    expect(await management.getIndicatorState(node, system)).toBe("blinking");
    expect(bmc.systems.get("node-1")!.led).toBe("Blinking");
    await management.injectNmi(node);
    expect(machine.nmis).toBe(1);
  });

  it("says so where the system has no SecureBoot or BootSourceOverrideMode", async () => {
    const bmc = await startRedfishBmc({
      password: "s3cret",
      systems: [{ id: "node-1", secureBoot: false, bootMode: false }],
    });
    bmcs.push(bmc);
    const conn = new RedfishConnections(FAST);
    connections.push(conn);
    const management = new RedfishManagement({ connections: conn });
    const node = nodeFor(bmc);
    await expect(management.getSecureBoot(node)).rejects.toThrow(/does not support UEFI secure boot/);
    await expect(management.setBootMode(node, "uefi")).rejects.toThrow(
      /does not support setting the boot mode/,
    );
    // a boot device change still works: the missing mode is left alone (Ironic's fix for partial services)
    await management.setBootDevice(node, { device: "pxe", persistent: false });
    expect(bmc.systems.get("node-1")!.boot.target).toBe("Pxe");
  });

  it("inspects out of band into the inventory shape, MACs normalised", async () => {
    const { node } = await setup();
    const inventory = InventorySchema.parse(await new RedfishInspect(connections[0]!).inspectHardware(node));
    expect(inventory.cpu).toMatchObject({ count: 4, architecture: "x86_64", socket_count: 1 });
    expect(inventory.memory.physical_mb).toBe(4096);
    expect(inventory.disks.map((d) => [d.name, d.size])).toEqual([["disk0", 20 * 1024 ** 3]]);
    expect(inventory.interfaces.map((i) => i.mac_address)).toEqual([
      "52:54:00:aa:00:01",
      "52:54:00:aa:00:02",
    ]);
    expect(inventory.boot.current_boot_mode).toBe("uefi");
  });

  it("finds the only system when redfish_system_id is absent, and asks for it when there are two", async () => {
    const { power, bmc } = await setup();
    const { redfish_system_id: _, ...rest } = nodeFor(bmc).driver_info;
    expect(await power.getPowerState({ ...nodeFor(bmc), driver_info: rest })).toBe("power off");
    const two = await startRedfishBmc({ password: "s3cret", systems: [{ id: "a" }, { id: "b" }] });
    bmcs.push(two);
    const { redfish_system_id: __, ...noId } = nodeFor(two).driver_info;
    await expect(power.getPowerState({ ...nodeFor(two), driver_info: noId })).rejects.toThrow(
      /redfish_system_id is required: .* has 2 systems/,
    );
  });

  it("refuses an answer larger than the bound", async () => {
    const { bmc } = await setup();
    const conn = new RedfishConnections({ ...FAST, maxBodyBytes: 200 });
    connections.push(conn);
    const power = new RedfishPower({ connections: conn });
    await expect(power.getPowerState(nodeFor(bmc))).rejects.toThrow(/larger than 200 bytes/);
  });

  it("gives up on an unreachable BMC with a retryable error", async () => {
    const conn = new RedfishConnections(FAST);
    connections.push(conn);
    const power = new RedfishPower({ connections: conn });
    const node = { ...nodeFor({ url: "http://127.0.0.1:1" } as RedfishBmc) };
    const failure = await power.getPowerState(node).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(RedfishError);
    expect((failure as RedfishError).retryable).toBe(true);
    expect(String(failure)).toMatch(/Redfish connection to http:\/\/127\.0\.0\.1:1 failed: ECONNREFUSED/);
  });
});

describe("the redfish driver over TLS", () => {
  let dir = "";
  let cert: { key: string; cert: string };
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "anvil-redfish-tls-"));
    cert = await selfSignedCert(dir);
    writeFileSync(join(dir, "ca.pem"), cert.cert);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("verifies the BMC against redfish_verify_ca, and refuses it against the system CAs", async () => {
    const bmc = await startRedfishBmc({ password: "s3cret", systems: [{ id: "node-1" }], tls: cert });
    const conn = new RedfishConnections(FAST);
    try {
      const power = new RedfishPower({ connections: conn });
      expect(bmc.url.startsWith("https://")).toBe(true);
      expect(await power.getPowerState(nodeFor(bmc, { redfish_verify_ca: join(dir, "ca.pem") }))).toBe(
        "power off",
      );
      await expect(power.getPowerState(nodeFor(bmc))).rejects.toThrow(
        /Redfish connection to https:.* failed/,
      );
      expect(await power.getPowerState(nodeFor(bmc, { redfish_verify_ca: "false" }))).toBe("power off");
    } finally {
      await conn.close();
      await bmc.stop();
    }
  });
});
