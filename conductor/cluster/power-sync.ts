import type { PowerState } from "../../shared/states.ts";
import { silentLogger } from "../../shared/log.ts";
import type { Logger } from "../../shared/log.ts";
import { Conflict } from "../errors.ts";

/** What the sync needs of one node, as the database has it. */
export interface SyncNode {
  uuid: string;
  /** The recorded power state; null for a node never synced. */
  powerState: PowerState | null;
  /** Consecutive failed syncs so far (driver_internal_info or a column: the port decides). */
  syncFailures: number;
  /** API 1.95: the node is never switched by the sync, whatever `forcePowerStateDuringSync` says. */
  disablePowerOff?: boolean;
}

/** The sync's view of the world; the conductor implements it over the database and the drivers. */
export interface PowerSyncPort {
  /** Nodes this conductor owns and may touch: not reserved, not in maintenance, not mid-transition. */
  listNodes(): Promise<SyncNode[]>;
  /** The BMC's answer; null where the driver cannot tell (fake-hardware never powered). @throws on failure */
  getPower(node: SyncNode, options: { signal?: AbortSignal }): Promise<PowerState | null>;
  /**
   * Switches the node under its lock and resolves once the BMC reports the state; resolves "skipped" when the
   * node could not be written this pass (reserved by someone, or changed since it was listed). @throws on failure
   */
  setPower(node: SyncNode, state: PowerState, options: { signal?: AbortSignal }): Promise<"skipped" | void>;
  recordPowerState(uuid: string, state: PowerState): Promise<void>;
  /** Stores the consecutive failure count (0 resets it). */
  recordFailure(uuid: string, count: number): Promise<void>;
  /** Puts the node in maintenance with this reason (maintenance_reason / last_error). */
  setMaintenance(uuid: string, reason: string): Promise<void>;
  /**
   * API 1.109: keeps the hardware health the BMC reported with the power state just read, when it changed
   * (Ironic's node_cache_health after each node's sync). Never throws: a failure is logged.
   */
  syncHealth?(node: SyncNode): Promise<void>;
}

/** The share of the sync interval a conductor's pass should end within (it adds workers to). */
export const POWER_SYNC_FIT = 0.8;

export interface PowerSyncOptions {
  /** Nodes synced at the same time, at first. */
  concurrency: number;
  /**
   * The pass should end within this time (a share of the sync interval): while its pace says it will not,
   * workers are added, up to `maxConcurrency`. A pass is bound by the BMCs' latency, so more workers finish
   * it sooner. Absent: the pass keeps `concurrency` workers.
   */
  fitWithinMs?: number;
  maxConcurrency?: number;
  /** How often the pace is looked at (default 1 s). */
  paceCheckMs?: number;
  /** true: power the node back to the recorded state; false: record what the BMC says (Ironic's default is true). */
  forcePowerStateDuringSync: boolean;
  /** Consecutive failures (BMC errors, or forced restores that did not stick) before maintenance. */
  maxFailures: number;
  signal?: AbortSignal;
  logger?: Logger;
}

export type NodeSyncOutcome =
  "in sync" | "initialised" | "recorded" | "restored" | "skipped" | "failed" | "maintenance" | "error";

export interface PowerSyncReport {
  checked: number;
  /** The most workers the pass ran with. */
  workers: number;
  outcomes: Record<NodeSyncOutcome, number>;
  /** uuids put into maintenance by this pass. */
  maintenance: string[];
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Syncs one node. Follows Ironic: a mismatch with force on counts as a failure and is corrected, so a node
 * someone keeps switching behind our back ends in maintenance instead of being fought over forever.
 */
async function syncNode(
  port: PowerSyncPort,
  node: SyncNode,
  options: PowerSyncOptions,
): Promise<NodeSyncOutcome> {
  const fail = async (reason: string): Promise<NodeSyncOutcome> => {
    const count = node.syncFailures + 1;
    await port.recordFailure(node.uuid, count);
    if (count < options.maxFailures) return "failed";
    await port.setMaintenance(node.uuid, `power failure: ${reason}`);
    return "maintenance";
  };

  let actual: PowerState | null;
  try {
    actual = await port.getPower(node, { signal: options.signal });
  } catch (error) {
    return fail(`cannot read the power state: ${messageOf(error)}`);
  }
  await port.syncHealth?.(node);
  // NOTE: a driver that cannot tell has nothing to correct (Ironic's sync: None and None match)
  if (actual === null) {
    if (node.syncFailures > 0) await port.recordFailure(node.uuid, 0);
    return "in sync";
  }
  if (node.powerState === null) {
    await port.recordPowerState(node.uuid, actual);
    if (node.syncFailures > 0) await port.recordFailure(node.uuid, 0);
    return "initialised";
  }
  if (actual === node.powerState) {
    if (node.syncFailures > 0) await port.recordFailure(node.uuid, 0);
    return "in sync";
  }
  // Ironic: a node with disable_power_off is never forced, its record follows the BMC
  if (!options.forcePowerStateDuringSync || node.disablePowerOff === true) {
    await port.recordPowerState(node.uuid, actual);
    if (node.syncFailures > 0) await port.recordFailure(node.uuid, 0);
    return "recorded";
  }
  const mismatch = `the BMC reports ${actual}, expected ${node.powerState}`;
  const count = node.syncFailures + 1;
  if (count >= options.maxFailures) {
    // Stop fighting: the record shows the truth, and an operator looks at the node.
    await port.recordPowerState(node.uuid, actual);
    return fail(`${mismatch} after ${node.syncFailures} forced corrections`);
  }
  try {
    // a node someone reserved since the listing (a reboot, a deploy) is theirs: left alone this pass (Ironic)
    if ((await port.setPower(node, node.powerState, { signal: options.signal })) === "skipped")
      return "skipped";
  } catch (error) {
    return fail(`${mismatch}, and restoring it failed: ${messageOf(error)}`);
  }
  await port.recordFailure(node.uuid, count);
  return "restored";
}

/**
 * One periodic power sync pass over the nodes the port lists, at most `concurrency` at a time.
 * A node's failure never stops the pass; an aborted signal stops starting new nodes.
 */
export async function runPowerSyncPass(
  port: PowerSyncPort,
  options: PowerSyncOptions,
): Promise<PowerSyncReport> {
  const logger = options.logger ?? silentLogger;
  const nodes = await port.listNodes();
  const report: PowerSyncReport = {
    checked: 0,
    workers: 0,
    outcomes: {
      "in sync": 0,
      initialised: 0,
      recorded: 0,
      restored: 0,
      skipped: 0,
      failed: 0,
      maintenance: 0,
      error: 0,
    },
    maintenance: [],
  };
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < nodes.length && options.signal?.aborted !== true) {
      const node = nodes[next++] as SyncNode;
      let outcome: NodeSyncOutcome;
      try {
        outcome = await syncNode(port, node, options);
      } catch (error) {
        if (error instanceof Conflict) {
          // a record write found the node reserved since the listing: its holder owns it now
          outcome = "skipped";
        } else {
          // The port itself failed (database down, ...): report and go on with the others.
          logger.error({ node: node.uuid, err: messageOf(error) }, "power sync: node not synced");
          outcome = "error";
        }
      }
      report.checked++;
      report.outcomes[outcome]++;
      if (outcome === "maintenance") report.maintenance.push(node.uuid);
      if (outcome !== "in sync") logger.info({ node: node.uuid, outcome }, "power sync");
    }
  };
  const running: Promise<void>[] = [];
  const addWorkers = (count: number): void => {
    for (let i = 0; i < count; i++) running.push(worker());
    report.workers += count;
  };
  addWorkers(Math.max(1, Math.min(options.concurrency, nodes.length)));
  const pacer = pace({ report, total: nodes.length, addWorkers }, options);
  try {
    // workers added while others run are awaited too
    for (let awaited = 0; awaited < running.length; awaited++) await running[awaited];
  } finally {
    clearInterval(pacer);
  }
  return report;
}

/** Adds workers while the pass's pace says it would end after `fitWithinMs` (none without it). */
function pace(
  pass: { report: PowerSyncReport; total: number; addWorkers: (count: number) => void },
  options: PowerSyncOptions,
): NodeJS.Timeout | undefined {
  const { report, total, addWorkers } = pass;
  const { fitWithinMs, maxConcurrency } = options;
  if (fitWithinMs === undefined || maxConcurrency === undefined || maxConcurrency <= report.workers) return;
  const began = performance.now();
  const timer = setInterval(() => {
    const wanted = workersToFinish({
      elapsedMs: performance.now() - began,
      done: report.checked,
      total,
      workers: report.workers,
      fitWithinMs,
    });
    const add = Math.min(wanted, maxConcurrency, total - report.checked) - report.workers;
    if (add > 0) addWorkers(add);
  }, options.paceCheckMs ?? 1000);
  timer.unref();
  return timer;
}

/**
 * The workers a pass needs to end within `fitWithinMs` at the pace it has had so far (latency bound: time
 * falls in proportion to workers); its current count when it is on time or has nothing to judge by. Pure.
 */
export function workersToFinish(pass: {
  elapsedMs: number;
  done: number;
  total: number;
  workers: number;
  fitWithinMs: number;
}): number {
  const left = pass.total - pass.done;
  const remainingMs = pass.fitWithinMs - pass.elapsedMs;
  if (pass.done === 0 || left <= 0) return pass.workers;
  const msPerNodePerWorker = (pass.elapsedMs * pass.workers) / pass.done;
  // late already: finish the rest as soon as a tenth of the budget allows
  const budget = Math.max(remainingMs, pass.fitWithinMs / 10);
  return Math.max(pass.workers, Math.ceil((left * msPerNodePerWorker) / budget));
}

/**
 * When a pass took longer than its interval, the worker count that would have fitted it (passes are latency
 * bound: time falls in proportion to workers), else null. Skipped intervals go unnoticed otherwise.
 */
export function workersToFit(pass: { seconds: number; intervalS: number; workers: number }): number | null {
  if (pass.intervalS <= 0 || pass.seconds <= pass.intervalS) return null;
  return Math.ceil((pass.workers * pass.seconds) / pass.intervalS);
}
