import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PowerState } from "../../shared/states.ts";
import { runPowerSyncPass } from "../../conductor/cluster/power-sync.ts";
import type { PowerSyncPort, SyncNode } from "../../conductor/cluster/power-sync.ts";
import type { DriverNode, PowerInterface } from "../../conductor/drivers/interfaces.ts";
import { Ipmitool } from "../../conductor/drivers/ipmi/ipmitool.ts";
import { IpmitoolPower } from "../../conductor/drivers/power/ipmitool.ts";
import { RmcpClient } from "../../conductor/drivers/ipmi/rmcp/client.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { ipmiHardware } from "../../conductor/drivers/registry.ts";
import { observeSpawns } from "../../shared/system/exec.ts";
import { startIpmiSim } from "../helpers/ipmi-sim.ts";
import type { IpmiSim } from "../helpers/ipmi-sim.ts";

interface Record_ {
  node: DriverNode;
  powerState: PowerState | null;
  failures: number;
  maintenance: string | null;
}

/** The port as the conductor would build it, over an in-memory "database" and the real ipmitool driver. */
class DriverBackedPort implements PowerSyncPort {
  readonly records = new Map<string, Record_>();
  constructor(private readonly power: PowerInterface) {}

  add(uuid: string, driverInfo: Record<string, unknown>, powerState: PowerState): void {
    const node: DriverNode = {
      uuid,
      name: null,
      driver_info: driverInfo,
      properties: {},
      instance_info: {},
      driver_internal_info: {},
      ports: [],
    };
    this.records.set(uuid, { node, powerState, failures: 0, maintenance: null });
  }
  record(uuid: string): Record_ {
    return this.records.get(uuid)!;
  }
  async listNodes(): Promise<SyncNode[]> {
    return [...this.records.values()]
      .filter((r) => r.maintenance === null)
      .map((r) => ({ uuid: r.node.uuid, powerState: r.powerState, syncFailures: r.failures }));
  }
  getPower(node: SyncNode, options: { signal?: AbortSignal }): Promise<PowerState | null> {
    return this.power.getPowerState(this.record(node.uuid).node, options);
  }
  setPower(node: SyncNode, state: PowerState, options: { signal?: AbortSignal }): Promise<void> {
    return this.power.setPowerState(this.record(node.uuid).node, state, options);
  }
  async recordPowerState(uuid: string, state: PowerState): Promise<void> {
    this.record(uuid).powerState = state;
  }
  async recordFailure(uuid: string, count: number): Promise<void> {
    this.record(uuid).failures = count;
  }
  async setMaintenance(uuid: string, reason: string): Promise<void> {
    this.record(uuid).maintenance = reason;
  }
}

describe("power sync against real ipmi_sim BMCs", () => {
  const sims: IpmiSim[] = [];
  const power = new IpmitoolPower({ ipmitool: new Ipmitool({ minIntervalMs: 20 }), pollIntervalMs: 50 });
  beforeAll(async () => {
    for (let i = 0; i < 2; i++) sims.push(await startIpmiSim({ initialPower: "on" }));
  });
  afterAll(async () => {
    for (const sim of sims) await sim.stop();
  });

  it("force on: an out-of-band power off is switched back on", async () => {
    const [sim] = sims as [IpmiSim];
    const port = new DriverBackedPort(power);
    port.add("node-a", sim.driverInfo(), "power on");
    await sim.setPower("off");
    const report = await runPowerSyncPass(port, {
      concurrency: 2,
      forcePowerStateDuringSync: true,
      maxFailures: 3,
    });
    expect(report.outcomes.restored).toBe(1);
    expect(await sim.power()).toBe("on");
    expect((await sim.events()).at(-1)).toBe("power 1");
    expect(port.record("node-a").powerState).toBe("power on");
  });

  it("force off: an out-of-band power off is recorded and left alone", async () => {
    const [, sim] = sims as [IpmiSim, IpmiSim];
    const port = new DriverBackedPort(power);
    port.add("node-b", sim.driverInfo(), "power on");
    await sim.setPower("off");
    const eventsBefore = await sim.events();
    const report = await runPowerSyncPass(port, {
      concurrency: 2,
      forcePowerStateDuringSync: false,
      maxFailures: 3,
    });
    expect(report.outcomes.recorded).toBe(1);
    expect(port.record("node-b").powerState).toBe("power off");
    expect(await sim.power()).toBe("off");
    expect(await sim.events()).toEqual(eventsBefore);
  });

  it("three failed syncs put the node in maintenance; healthy nodes are untouched", async () => {
    const [good, other] = sims as [IpmiSim, IpmiSim];
    await good.setPower("on");
    const port = new DriverBackedPort(power);
    port.add("healthy", good.driverInfo(), "power on");
    port.add("broken", { ...other.driverInfo(), ipmi_password: "wrong" }, "power on");
    const options = { concurrency: 2, forcePowerStateDuringSync: true, maxFailures: 3 };
    for (let pass = 1; pass <= 2; pass++) {
      await runPowerSyncPass(port, options);
      expect(port.record("broken")).toMatchObject({ failures: pass, maintenance: null });
    }
    const report = await runPowerSyncPass(port, options);
    expect(report.maintenance).toEqual(["broken"]);
    expect(port.record("broken").maintenance).toMatch(
      /^power failure: cannot read the power state: .*wrong password/,
    );
    expect(port.record("healthy")).toMatchObject({ failures: 0, maintenance: null, powerState: "power on" });
    // In maintenance, the node is no longer synced.
    expect((await runPowerSyncPass(port, options)).checked).toBe(1);
  });
});

describe("power sync reading status natively (RMCP+) from real ipmi_sim BMCs", () => {
  const sims: IpmiSim[] = [];
  const spawned: string[] = [];
  const stopObserving = observeSpawns((command) => spawned.push(command));
  const statusClient = new RmcpClient({ packetTimeoutMs: 300, retries: 0 });
  const power = new IpmitoolPower({
    ipmitool: new Ipmitool({ minIntervalMs: 20 }),
    statusClient,
    pollIntervalMs: 50,
  });
  beforeAll(async () => {
    for (let i = 0; i < 2; i++) sims.push(await startIpmiSim({ initialPower: "on" }));
  });
  afterAll(async () => {
    stopObserving();
    await statusClient.close();
    for (const sim of sims) await sim.stop();
  });

  it("a pass over nodes in sync runs no program at all", async () => {
    const port = new DriverBackedPort(power);
    sims.forEach((sim, i) => port.add(`native-${i}`, sim.driverInfo(), "power on"));
    spawned.length = 0;
    const report = await runPowerSyncPass(port, {
      concurrency: 2,
      forcePowerStateDuringSync: true,
      maxFailures: 3,
    });
    expect(report.outcomes["in sync"]).toBe(2);
    expect(spawned).toEqual([]);
  });

  it("an out-of-band power off is read natively and restored through ipmitool", async () => {
    const [sim] = sims as [IpmiSim];
    const port = new DriverBackedPort(power);
    port.add("native-a", sim.driverInfo(), "power on");
    await sim.setPower("off");
    spawned.length = 0;
    const report = await runPowerSyncPass(port, {
      concurrency: 2,
      forcePowerStateDuringSync: true,
      maxFailures: 3,
    });
    expect(report.outcomes.restored).toBe(1);
    expect(await sim.power()).toBe("on");
    expect(spawned.filter((command) => command === "ipmitool").length).toBeGreaterThan(0);
  });

  it("a wrong password ends in maintenance with the native client's reason", async () => {
    const [, other] = sims as [IpmiSim, IpmiSim];
    const port = new DriverBackedPort(power);
    port.add("native-broken", { ...other.driverInfo(), ipmi_password: "wrong" }, "power on");
    const options = { concurrency: 1, forcePowerStateDuringSync: true, maxFailures: 2 };
    await runPowerSyncPass(port, options);
    const report = await runPowerSyncPass(port, options);
    expect(report.maintenance).toEqual(["native-broken"]);
    expect(port.record("native-broken").maintenance).toMatch(
      /cannot read the power state: RMCP\+ .*wrong password/,
    );
  });

  it("the ipmi hardware type reads natively by default, and through ipmitool when configured so", async () => {
    const [sim] = sims as [IpmiSim];
    const node: DriverNode = {
      uuid: "hw-node",
      name: null,
      driver_info: sim.driverInfo(),
      properties: {},
      instance_info: {},
      driver_internal_info: {},
      ports: [],
    };
    await sim.setPower("on");
    for (const statusClient of ["native", "ipmitool"] as const) {
      const config = defaultConfig();
      config.ipmi.statusClient = statusClient;
      const hw = ipmiHardware(config);
      spawned.length = 0;
      try {
        expect(await hw.power.getPowerState(node)).toBe("power on");
      } finally {
        await hw.stop?.();
      }
      expect(spawned.includes("ipmitool")).toBe(statusClient === "ipmitool");
    }
  });
});
