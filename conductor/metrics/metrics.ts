import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { ConductorEvent } from "../events/hub.ts";

/**
 * The conductor's Prometheus metrics: what an operator asks of a fleet (how long do deploys take and how
 * often do they fail, where are the nodes, are agents connected, how fast do images land, is the power
 * sync keeping up, is the API or a BMC slow). One registry per conductor, so tests can run several.
 */
export interface ConductorMetrics {
  registry: Registry;
  /** Feed of the event hub: provision transitions, agent sessions, write progress. */
  onEvent(event: ConductorEvent): void;
  observeRequest(labels: { method: string; route: string; status: number }, seconds: number): void;
  observeBmcCall(labels: { command: string; outcome: string }, seconds: number): void;
  observePowerSync(report: { seconds: number; failed: number; checked: number }): void;
  /** Sets the node gauges from counts the store computes (called at scrape time). */
  /** Event stream clients connected now (set at scrape time). */
  setEventSubscribers(count: number): void;
  setNodeCounts(counts: {
    byState: Record<string, number>;
    byPower: Record<string, number>;
    byFault: Record<string, number>;
  }): void;
}

/** Which operation a provision event starts, and which states end it (with their outcome). */
const OPERATION_OF_EVENT: Record<string, "deploy" | "clean" | "inspect"> = {
  deploy: "deploy",
  rebuild: "deploy",
  provide: "clean",
  clean: "clean",
  undeploy: "clean",
  inspect: "inspect",
};
const END_STATES: Record<
  string,
  { operation: "deploy" | "clean" | "inspect"; outcome: "success" | "failure" }
> = {
  active: { operation: "deploy", outcome: "success" },
  "deploy failed": { operation: "deploy", outcome: "failure" },
  available: { operation: "clean", outcome: "success" },
  "clean failed": { operation: "clean", outcome: "failure" },
  "inspect failed": { operation: "inspect", outcome: "failure" },
};

const DURATION_BUCKETS = [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600];

export function createMetrics(): ConductorMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const provisionSeconds = new Histogram({
    name: "anvil_provision_duration_seconds",
    help: "Duration of deploys, cleanings and inspections, from the request to a stable state, by outcome.",
    labelNames: ["operation", "outcome"],
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const nodes = new Gauge({
    name: "anvil_nodes",
    help: "Nodes by provision state.",
    labelNames: ["provision_state"],
    registers: [registry],
  });
  const nodesByPower = new Gauge({
    name: "anvil_nodes_power",
    help: "Nodes by power state.",
    labelNames: ["power_state"],
    registers: [registry],
  });
  const nodesByFault = new Gauge({
    name: "anvil_nodes_fault",
    help: "Nodes in maintenance by fault (power failure, clean failure, ...).",
    labelNames: ["fault"],
    registers: [registry],
  });
  const agentSessions = new Gauge({
    name: "anvil_agent_sessions",
    help: "Agents connected to this conductor.",
    registers: [registry],
  });
  const eventSubscribers = new Gauge({
    name: "anvil_event_subscribers",
    help: "Event stream (/v1/events) clients: the CLI's --wait, dashboards.",
    registers: [registry],
  });
  const imageBytes = new Counter({
    name: "anvil_image_bytes_written_total",
    help: "Image bytes agents reported written to disks.",
    registers: [registry],
  });
  const imageRate = new Gauge({
    name: "anvil_image_write_rate_bytes",
    help: "Sum of the write rates agents reported last, over the writes in progress.",
    registers: [registry],
  });
  const imageWrites = new Gauge({
    name: "anvil_image_writes_in_progress",
    help: "Image writes in progress.",
    registers: [registry],
  });
  const powerSyncSeconds = new Histogram({
    name: "anvil_power_sync_pass_duration_seconds",
    help: "Duration of one power-state sync pass over this conductor's nodes.",
    buckets: [0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600],
    registers: [registry],
  });
  const powerSyncFailures = new Counter({
    name: "anvil_power_sync_failures_total",
    help: "Nodes whose power state could not be read during a sync pass.",
    registers: [registry],
  });
  const powerSyncChecked = new Counter({
    name: "anvil_power_sync_nodes_checked_total",
    help: "Nodes checked by power sync passes.",
    registers: [registry],
  });
  const requestSeconds = new Histogram({
    name: "anvil_http_request_duration_seconds",
    help: "API latency by route and status.",
    labelNames: ["method", "route", "status"],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const requestsTotal = new Counter({
    name: "anvil_http_requests_total",
    help: "API requests answered.",
    registers: [registry],
  });
  const bmcSeconds = new Histogram({
    name: "anvil_bmc_call_duration_seconds",
    help: "BMC (ipmitool) call latency by command and outcome (ok, auth, unreachable, timeout, ...).",
    labelNames: ["command", "outcome"],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20],
    registers: [registry],
  });
  const bmcErrors = new Counter({
    name: "anvil_bmc_errors_total",
    help: "BMC calls that failed, by command and kind.",
    labelNames: ["command", "outcome"],
    registers: [registry],
  });

  // per-node bookkeeping for durations and write progress
  const started = new Map<string, { operation: string; at: number }>();
  const written = new Map<string, { bytes: number; rate: number }>();
  const sessions = new Set<string>();
  const rateSum = (): number => [...written.values()].reduce((sum, w) => sum + w.rate, 0);

  return {
    registry,
    onEvent(event) {
      if (event.type === "provision") {
        const operation = OPERATION_OF_EVENT[String(event.event)];
        if (operation) started.set(event.node, { operation, at: Date.now() });
        const end = END_STATES[String(event.provision_state)];
        const begun = started.get(event.node);
        // "available" also ends an undeploy's cleaning; "manageable" ends inspection and manual cleaning
        const ending =
          end?.operation === begun?.operation
            ? end
            : event.provision_state === "manageable" && begun && begun.operation !== "deploy"
              ? { operation: begun.operation, outcome: "success" as const }
              : undefined;
        if (ending && begun) {
          provisionSeconds.observe(
            { operation: ending.operation, outcome: ending.outcome },
            (Date.now() - begun.at) / 1000,
          );
          started.delete(event.node);
        }
        if (event.provision_state !== "deploying" && written.delete(event.node)) {
          imageWrites.set(written.size);
          imageRate.set(rateSum());
        }
      } else if (event.type === "agent") {
        if (event.connected === true) sessions.add(event.node);
        else sessions.delete(event.node);
        agentSessions.set(sessions.size);
      } else if (event.type === "progress") {
        const progress = (event.progress ?? {}) as { bytes_done?: number; rate_bps?: number };
        const done = progress.bytes_done ?? 0;
        const before = written.get(event.node);
        if (before && done > before.bytes) imageBytes.inc(done - before.bytes);
        else if (!before && done > 0) imageBytes.inc(done);
        written.set(event.node, { bytes: Math.max(done, before?.bytes ?? 0), rate: progress.rate_bps ?? 0 });
        imageWrites.set(written.size);
        imageRate.set(rateSum());
      }
    },
    observeRequest(labels, seconds) {
      requestsTotal.inc();
      requestSeconds.observe(
        { method: labels.method, route: labels.route, status: String(labels.status) },
        seconds,
      );
    },
    observeBmcCall(labels, seconds) {
      bmcSeconds.observe(labels, seconds);
      if (labels.outcome !== "ok") bmcErrors.inc(labels);
    },
    observePowerSync(report) {
      powerSyncSeconds.observe(report.seconds);
      powerSyncFailures.inc(report.failed);
      powerSyncChecked.inc(report.checked);
    },
    setEventSubscribers(count) {
      eventSubscribers.set(count);
    },
    setNodeCounts(counts) {
      nodes.reset();
      for (const [state, n] of Object.entries(counts.byState)) nodes.set({ provision_state: state }, n);
      nodesByPower.reset();
      for (const [state, n] of Object.entries(counts.byPower)) nodesByPower.set({ power_state: state }, n);
      nodesByFault.reset();
      for (const [fault, n] of Object.entries(counts.byFault)) nodesByFault.set({ fault }, n);
    },
  };
}
