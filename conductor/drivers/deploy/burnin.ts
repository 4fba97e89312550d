import { randomUUID } from "node:crypto";
import { historyState, snapshotOf } from "../../../shared/history.ts";
import {
  BURNIN_DEFAULT_TIMEOUT_S,
  BurninCpuArgs,
  BurninDiskArgs,
  BurninMemoryArgs,
  BurninNetworkArgs,
  burninArgs,
  type BurninStep,
} from "../../../shared/burnin.ts";
import type { CommandArgs } from "../../../shared/protocol.ts";
import { Invalid } from "../../errors.ts";
import { agentCommand } from "../agent-command.ts";
import type { AgentStepRun, StepArgs } from "../step.ts";
import type { DriverTask as Task } from "../task-context.ts";

/** A burn-in command may run past its own time by this much before the conductor gives up on it. */
const MARGIN_S = 900;
/** fio without a runtime runs its loops to the end: the conductor waits up to a week. */
const UNBOUNDED_S = 7 * 86_400;

const SCHEMAS = {
  burnin_cpu: BurninCpuArgs,
  burnin_memory: BurninMemoryArgs,
  burnin_disk: BurninDiskArgs,
  burnin_network: BurninNetworkArgs,
} as const;

/** How long the conductor waits for the command: the burn-in's own time plus a margin. */
function waitSeconds(step: BurninStep, args: Record<string, unknown>): number {
  const num = (key: string, fallback: number) => (typeof args[key] === "number" ? args[key] : fallback);
  switch (step) {
    case "burnin_cpu":
    case "burnin_memory":
      return num("timeout", BURNIN_DEFAULT_TIMEOUT_S) + MARGIN_S;
    case "burnin_disk": {
      const runtime = num("runtime", 0);
      return runtime > 0 ? runtime * num("loops", 4) + MARGIN_S : UNBOUNDED_S;
    }
    case "burnin_network":
      // two directions, and a reader may wait up to 900 s for its writer each time
      return 2 * (num("runtime", 21_600) + 900) + MARGIN_S;
  }
}

/** One line of figures for the node's history. */
export function burninSummary(step: BurninStep, result: unknown): string {
  const r = (result ?? {}) as {
    metrics?: { stressor: string; bogo_ops: number; real_time_s: number; bogo_ops_per_s: number }[];
    devices?: { name: string; read_mb_s: number; write_mb_s: number; total_errors: number }[];
    directions?: { role: string; read_mb_s: number; write_mb_s: number }[];
  };
  const parts =
    r.metrics?.map(
      (m) => `${m.stressor} ${m.bogo_ops} bogo ops in ${m.real_time_s} s (${m.bogo_ops_per_s}/s)`,
    ) ??
    r.devices?.map(
      (d) => `${d.name} read ${d.read_mb_s} MB/s, write ${d.write_mb_s} MB/s, ${d.total_errors} errors`,
    ) ??
    r.directions?.map((d) => `${d.role} ${d.role === "writer" ? d.write_mb_s : d.read_mb_s} MB/s`) ??
    [];
  return `${step} passed: ${parts.join("; ")}`;
}

/**
 * The conductor's side of a burn-in step (Ironic passes the node to IPA, which reads driver_info): the
 * command's arguments from the node's `agent_burnin_*` driver_info, the step's args over them; the result
 * kept as driver_internal_info.<step>_result and its figures in the node's history.
 * @throws Invalid when the knobs make no valid command (naming them); AgentCommandError when the burn-in fails.
 */
export function burninRun(step: BurninStep): AgentStepRun {
  return async (task: Task, stepArgs: StepArgs) => {
    const merged = burninArgs(step, task.node.driver_info, stepArgs as Record<string, unknown>);
    const parsed = SCHEMAS[step].safeParse(merged);
    if (!parsed.success) {
      const problems = parsed.error.issues.map((i) => `${i.path.join(".") || "(args)"}: ${i.message}`);
      const hint =
        step === "burnin_network" && (merged.role === undefined || merged.partner === undefined)
          ? ' (set driver_info agent_burnin_fio_network_config to {"role": "writer"|"reader", "partner": "<address>"}; dynamic pairing is not supported)'
          : "";
      throw new Invalid(`${step}: invalid burn-in settings: ${problems.join("; ")}${hint}`);
    }
    const args = parsed.data as Record<string, unknown>;
    const result = await agentCommand(
      task,
      { name: step, args: args as CommandArgs<typeof step> },
      { timeoutMs: Math.max(task.deps.config.agent.commandTimeoutS, waitSeconds(step, args)) * 1000 },
    );
    await task.mergeInternalInfo({ [`${step}_result`]: result });
    const at = new Date();
    await task.deps.store.addNodeHistory({
      ...historyState(snapshotOf(task.node), at),
      uuid: randomUUID(),
      node_uuid: task.node.uuid,
      created_at: at.toISOString(),
      severity: "INFO",
      event: burninSummary(step, result),
      event_type: "burnin",
      conductor: task.deps.holder,
      user: null,
      project: null,
      remote_address: null,
      request_id: null,
      changes: { [`${step}_result`]: result },
    });
  };
}
