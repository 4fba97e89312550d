import { snapshotOf } from "../../../shared/history.ts";
import {
  BURNIN_DEFAULT_TIMEOUT_S,
  BurninCpuArgs,
  BurninDiskArgs,
  BurninMemoryArgs,
  BurninNetworkArgs,
  burninArgs,
  burninPairingSettings,
  type BurninStep,
} from "../../../shared/burnin.ts";
import type { CommandArgs } from "../../../shared/protocol.ts";
import { Invalid } from "../../errors.ts";
import { historyRecord } from "../../history/recorder.ts";
import { agentCommand } from "../agent-command.ts";
import { DriverError } from "../errors.ts";
import type { AgentStepRun, StepArgs } from "../step.ts";
import type { DriverTask as Task, TaskDeps } from "../task-context.ts";
import { NetworkBurninPairing, type Pairing } from "./burnin-pairing.ts";

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

/** Deps without a meeting point of their own (tests' harnesses) get one, kept as long as they are. */
const fallbackPairings = new WeakMap<TaskDeps, NetworkBurninPairing>();

function pairingOf(deps: TaskDeps): NetworkBurninPairing {
  if (deps.burninPairing !== undefined) return deps.burninPairing;
  let pairing = fallbackPairings.get(deps);
  if (pairing === undefined) {
    pairing = new NetworkBurninPairing();
    fallbackPairings.set(deps, pairing);
  }
  return pairing;
}

/**
 * burnin_network without a static pairing (no role and partner): the conductor pairs this node with the next
 * one of its group to ask (IPA's dynamic pairing, whose tooz group the conductor stands in for), telling
 * each its role and its partner's address, the one the partner's agent dialled the conductor from.
 * @throws Invalid for bad pairing knobs; DriverError when the agent's address is unknown or no partner comes.
 */
async function pairDynamically(task: Task): Promise<Pairing> {
  const knobs = burninPairingSettings(task.node.driver_info);
  if (!knobs.ok) throw new Invalid(`burnin_network: invalid pairing settings: ${knobs.problems.join("; ")}`);
  const address = task.deps.agents.addressOf?.(task.node.uuid);
  if (address === undefined) {
    throw new DriverError(
      `burnin_network: the agent's address is unknown, so no partner can reach it; set driver_info agent_burnin_fio_network_config to {"role": "writer"|"reader", "partner": "<address>"}`,
    );
  }
  const { group_name: group, timeout } = knobs.settings;
  task.log.info({ group, timeoutS: timeout, address }, "burnin_network: waiting for a partner");
  const pairing = await pairingOf(task.deps).join(
    group,
    { node: task.node.uuid, address },
    { timeoutMs: timeout * 1000, signal: task.signal },
  );
  task.log.info({ ...pairing }, "burnin_network: paired");
  return pairing;
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
    let pairing: Pairing | undefined;
    if (step === "burnin_network" && merged.role === undefined && merged.partner === undefined) {
      pairing = await pairDynamically(task);
      merged.role = pairing.role;
      merged.partner = pairing.partner;
    }
    const parsed = SCHEMAS[step].safeParse(merged);
    if (!parsed.success) {
      const problems = parsed.error.issues.map((i) => `${i.path.join(".") || "(args)"}: ${i.message}`);
      const hint =
        step === "burnin_network" && (merged.role === undefined || merged.partner === undefined)
          ? ' (set driver_info agent_burnin_fio_network_config to {"role": "writer"|"reader", "partner": "<address>"}, or neither for the conductor to pair the node)'
          : "";
      throw new Invalid(`${step}: invalid burn-in settings: ${problems.join("; ")}${hint}`);
    }
    const args = parsed.data as Record<string, unknown>;
    const result = await agentCommand(
      task,
      { name: step, args: args as CommandArgs<typeof step> },
      { timeoutMs: Math.max(task.deps.config.agent.commandTimeoutS, waitSeconds(step, args)) * 1000 },
    );
    const recorded =
      pairing === undefined
        ? result
        : { ...(result as object), pairing: { group: pairing.group, partner_node: pairing.partner_node } };
    await task.mergeInternalInfo({ [`${step}_result`]: recorded });
    const event =
      burninSummary(step, result) +
      (pairing === undefined ? "" : ` (paired with node ${pairing.partner_node} as ${pairing.role})`);
    const entry = {
      node: task.node.uuid,
      event,
      eventType: "burnin",
      changes: { [`${step}_result`]: recorded },
      snapshot: snapshotOf(task.node),
    };
    await task.deps.store.addNodeHistory(historyRecord(entry, task.deps.holder, new Date()));
  };
}
