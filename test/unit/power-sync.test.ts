import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import type { PowerState } from "../../shared/states.ts";
import { runPowerSyncPass, workersToFinish, workersToFit } from "../../conductor/cluster/power-sync.ts";
import type { PowerSyncPort, SyncNode } from "../../conductor/cluster/power-sync.ts";

interface Row {
  recorded: PowerState | null;
  actual: PowerState | null | Error;
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
  async getPower(node: SyncNode): Promise<PowerState | null> {
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

  it("leaves alone a node whose driver cannot tell (fake-hardware never powered: Ironic's None)", async () => {
    const port = new MemoryPort();
    port.add("a", { recorded: null, actual: null, failures: 1 });
    const report = await runPowerSyncPass(port, force);
    expect(port.setCalls).toEqual([]);
    expect(port.row("a")).toMatchObject({ recorded: null, failures: 0, maintenance: null });
    expect(report.outcomes["in sync"]).toBe(1);
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

describe("a pass that would not fit its interval", () => {
  it("asks for the workers that finish the rest in the time left, never fewer than it has", () => {
    // 1,000 of 10,000 nodes in 10 s with 8 workers: 9,000 left at 80 ms each per worker, 40 s left of 50
    expect(
      workersToFinish({ elapsedMs: 10_000, done: 1_000, total: 10_000, workers: 8, fitWithinMs: 50_000 }),
    ).toBe(18);
    // on time: keeps its workers
    expect(
      workersToFinish({ elapsedMs: 10_000, done: 5_000, total: 10_000, workers: 8, fitWithinMs: 50_000 }),
    ).toBe(8);
    // nothing done yet, or nothing left: nothing to judge by
    expect(
      workersToFinish({ elapsedMs: 10_000, done: 0, total: 10_000, workers: 8, fitWithinMs: 50_000 }),
    ).toBe(8);
    expect(workersToFinish({ elapsedMs: 10_000, done: 10, total: 10, workers: 8, fitWithinMs: 50_000 })).toBe(
      8,
    );
    // already late: the rest within a tenth of the budget
    expect(
      workersToFinish({ elapsedMs: 60_000, done: 1_000, total: 2_000, workers: 4, fitWithinMs: 50_000 }),
    ).toBe(48);
  });

  it("adds workers while its pace says it would end late, up to the maximum, and syncs every node once", async () => {
    const port = new MemoryPort(); // 2 ms a BMC call: 300 nodes take 600 ms with one worker
    for (let i = 0; i < 300; i++) port.add(`n${i}`, {});
    const seen: string[] = [];
    const getPower = port.getPower.bind(port);
    port.getPower = async (node) => {
      seen.push(node.uuid);
      return getPower(node);
    };
    const report = await runPowerSyncPass(port, {
      ...force,
      concurrency: 1,
      fitWithinMs: 60,
      maxConcurrency: 6,
      paceCheckMs: 10,
    });
    expect(report.checked).toBe(300);
    expect(report.outcomes["in sync"]).toBe(300);
    expect(new Set(seen).size).toBe(300);
    expect(seen).toHaveLength(300);
    expect(report.workers).toBe(6);
    expect(port.maxInFlight).toBeGreaterThan(1);
    expect(port.maxInFlight).toBeLessThanOrEqual(6);
  });

  it("keeps its workers without a time to fit in", async () => {
    const port = new MemoryPort();
    for (let i = 0; i < 100; i++) port.add(`n${i}`, {});
    const report = await runPowerSyncPass(port, {
      ...force,
      concurrency: 2,
      maxConcurrency: 6,
      paceCheckMs: 5,
    });
    expect(report.workers).toBe(2);
    expect(port.maxInFlight).toBeLessThanOrEqual(2);
  });
});
