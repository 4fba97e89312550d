import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import type { PowerState } from "../../shared/states.ts";
import { runPowerSyncPass, workersToFit } from "../../conductor/cluster/power-sync.ts";
import type { PowerSyncPort, SyncNode } from "../../conductor/cluster/power-sync.ts";

interface Row {
  recorded: PowerState | null;
  actual: PowerState | Error;
  failures: number;
  maintenance: string | null;
}

/** A database and BMCs in memory; nodes in maintenance are not listed, as the real port does. */
class MemoryPort implements PowerSyncPort {
  readonly rows = new Map<string, Row>();
  inFlight = 0;
  maxInFlight = 0;
  setCalls: [string, PowerState][] = [];

  add(uuid: string, row: Partial<Row>): void {
    this.rows.set(uuid, { recorded: "power on", actual: "power on", failures: 0, maintenance: null, ...row });
  }
  row(uuid: string): Row {
    return this.rows.get(uuid)!;
  }
  async listNodes(): Promise<SyncNode[]> {
    return [...this.rows]
      .filter(([, row]) => row.maintenance === null)
      .map(([uuid, row]) => ({ uuid, powerState: row.recorded, syncFailures: row.failures }));
  }
  async getPower(node: SyncNode): Promise<PowerState> {
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    await sleep(2);
    this.inFlight--;
    const actual = this.row(node.uuid).actual;
    if (actual instanceof Error) throw actual;
    return actual;
  }
  async setPower(node: SyncNode, state: PowerState): Promise<void> {
    this.setCalls.push([node.uuid, state]);
    this.row(node.uuid).actual = state;
  }
  async recordPowerState(uuid: string, state: PowerState): Promise<void> {
    this.row(uuid).recorded = state;
  }
  async recordFailure(uuid: string, count: number): Promise<void> {
    this.row(uuid).failures = count;
  }
  async setMaintenance(uuid: string, reason: string): Promise<void> {
    this.row(uuid).maintenance = reason;
  }
}

const force = { concurrency: 4, forcePowerStateDuringSync: true, maxFailures: 3 };

describe("power sync pass", () => {
  it("restores the recorded state when forcing", async () => {
    const port = new MemoryPort();
    port.add("a", { recorded: "power on", actual: "power off" });
    const report = await runPowerSyncPass(port, force);
    expect(port.setCalls).toEqual([["a", "power on"]]);
    expect(port.row("a").actual).toBe("power on");
    expect(report.outcomes.restored).toBe(1);
  });

  it("records the BMC's state when not forcing", async () => {
    const port = new MemoryPort();
    port.add("a", { recorded: "power on", actual: "power off", failures: 1 });
    const report = await runPowerSyncPass(port, { ...force, forcePowerStateDuringSync: false });
    expect(port.setCalls).toEqual([]);
    expect(port.row("a")).toMatchObject({ recorded: "power off", failures: 0 });
    expect(report.outcomes.recorded).toBe(1);
  });

  it("initialises a node never synced, whatever force says", async () => {
    const port = new MemoryPort();
    port.add("a", { recorded: null, actual: "power off" });
    await runPowerSyncPass(port, force);
    expect(port.row("a").recorded).toBe("power off");
    expect(port.setCalls).toEqual([]);
  });

  it("puts a node in maintenance after maxFailures consecutive failures, and not before", async () => {
    const port = new MemoryPort();
    port.add("a", { actual: new Error("BMC 10.0.0.9:623 did not answer") });
    await runPowerSyncPass(port, force);
    await runPowerSyncPass(port, force);
    expect(port.row("a")).toMatchObject({ failures: 2, maintenance: null });
    const report = await runPowerSyncPass(port, force);
    expect(report.maintenance).toEqual(["a"]);
    expect(port.row("a").maintenance).toBe(
      "power failure: cannot read the power state: BMC 10.0.0.9:623 did not answer",
    );
  });

  it("resets the failure count once the node is in sync again", async () => {
    const port = new MemoryPort();
    port.add("a", { actual: new Error("timeout") });
    await runPowerSyncPass(port, force);
    await runPowerSyncPass(port, force);
    port.row("a").actual = "power on";
    await runPowerSyncPass(port, force);
    expect(port.row("a")).toMatchObject({ failures: 0, maintenance: null });
  });

  it("stops fighting a node that keeps being switched behind its back", async () => {
    const port = new MemoryPort();
    port.add("a", {});
    for (let pass = 0; pass < 3; pass++) {
      port.row("a").actual = "power off";
      await runPowerSyncPass(port, force);
    }
    expect(port.setCalls).toHaveLength(2);
    expect(port.row("a").maintenance).toMatch(/^power failure: the BMC reports power off, expected power on/);
    expect(port.row("a").recorded).toBe("power off");
  });

  it("keeps going when one node's port call throws, and bounds concurrency", async () => {
    const port = new MemoryPort();
    for (let i = 0; i < 40; i++) port.add(`n${i}`, {});
    port.recordFailure = async () => Promise.reject(new Error("database is down"));
    port.row("n3").actual = new Error("no answer");
    const report = await runPowerSyncPass(port, { ...force, concurrency: 5 });
    expect(report.checked).toBe(40);
    expect(report.outcomes.error).toBe(1);
    expect(report.outcomes["in sync"]).toBe(39);
    expect(port.maxInFlight).toBe(5);
  });

  it("starts no new node after the signal aborts", async () => {
    const port = new MemoryPort();
    for (let i = 0; i < 10; i++) port.add(`n${i}`, {});
    const controller = new AbortController();
    controller.abort();
    const report = await runPowerSyncPass(port, { ...force, signal: controller.signal });
    expect(report.checked).toBe(0);
  });
});

describe("a pass longer than its interval", () => {
  it("names the workers that would have fitted it, and nothing when it fitted", () => {
    // the bench's 10^5 nodes over three conductors: 85 s at 8 workers against a 60 s interval
    expect(workersToFit({ seconds: 85.1, intervalS: 60, workers: 8 })).toBe(12);
    expect(workersToFit({ seconds: 59.9, intervalS: 60, workers: 8 })).toBeNull();
    expect(workersToFit({ seconds: 120, intervalS: 0, workers: 8 })).toBeNull();
    expect(workersToFit({ seconds: 121, intervalS: 60, workers: 32 })).toBe(65);
  });
});
