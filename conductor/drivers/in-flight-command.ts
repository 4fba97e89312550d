import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { NodeRecord } from "../../shared/resources.ts";
import type { DriverTask as Task } from "./task-context.ts";

/**
 * The agent commands the running step sent, kept in driver_internal_info before each is sent: when the
 * conductor dies (or restarts) while the agent works, the next owner runs the step again and asks for the
 * same ids, so it gets the agent's result instead of doing the work twice (Ironic's agent keeps its command
 * status for the next conductor's heartbeat handling in the same way).
 */
export const IN_FLIGHT_KEY = "agent_commands_in_flight";

const InFlightSchema = z.object({
  /** `<kind>:<index>` of the plan step that sent them */
  step: z.string(),
  ids: z.record(z.string(), z.string().min(1).max(128)),
  /** commands whose answer the step has had (asked again, they would be run again: a fresh id) */
  settled: z.array(z.string()).default([]),
});
type InFlight = z.infer<typeof InFlightSchema>;

/** The step a running plan is at, as the in-flight record names it. */
export function stepMarker(kind: string, index: number): string {
  return `${kind}:${index}`;
}

function inFlightOf(node: Pick<NodeRecord, "driver_internal_info">): InFlight | null {
  const parsed = InFlightSchema.safeParse(node.driver_internal_info[IN_FLIGHT_KEY]);
  return parsed.success ? parsed.data : null;
}

/**
 * The record, if it belongs to the step at `marker`; else null (a stale one is dropped by the runner). Its
 * `ids` not in `settled` are the commands the step still waits on.
 */
export function inFlightFor(node: Pick<NodeRecord, "driver_internal_info">, marker: string): InFlight | null {
  const record = inFlightOf(node);
  return record?.step === marker ? record : null;
}

/**
 * The id to send `name` with from the running step: the one recorded for it (asking again re-attaches to
 * the command the agent may still run or have finished), else a fresh one recorded first. Outside a step
 * (inspection, step discovery: read-only and cheap to repeat) there is no record and no id.
 */
export async function commandIdFor(task: Task, name: string): Promise<string | undefined> {
  const marker = task.runningStep;
  if (marker === undefined) return undefined;
  const record = inFlightFor(task.node, marker);
  const known = record?.settled.includes(name) ? undefined : record?.ids[name];
  if (known !== undefined) {
    task.log.info(
      { command: name, id: known, step: marker },
      "asking the agent again for a command in flight",
    );
    return known;
  }
  const id = randomUUID();
  await task.mergeInternalInfo({
    [IN_FLIGHT_KEY]: {
      step: marker,
      ids: { ...record?.ids, [name]: id },
      settled: (record?.settled ?? []).filter((n) => n !== name),
    },
  });
  return id;
}

/** Whether the node's running step sent `name` and has not had its answer (an agent still owes it). */
export function awaitsCommand(node: Pick<NodeRecord, "driver_internal_info">, name: string): boolean {
  const record = inFlightOf(node);
  return record !== null && record.ids[name] !== undefined && !record.settled.includes(name);
}

/** Records that the step has the answer to `name` (so a takeover now has nothing to wait for). */
export async function commandSettled(task: Task, name: string): Promise<void> {
  const marker = task.runningStep;
  const record = marker === undefined ? null : inFlightFor(task.node, marker);
  if (!record || record.settled.includes(name)) return;
  await task.mergeInternalInfo({ [IN_FLIGHT_KEY]: { ...record, settled: [...record.settled, name] } });
}
