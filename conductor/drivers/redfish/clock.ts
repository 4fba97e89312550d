import { z } from "zod";
import type { CallOptions, DriverNode } from "../out-of-band.ts";
import { defineStep, type Step } from "../step.ts";
import { RedfishError, type RedfishConnections } from "./client.ts";
import { loadSystem, managerPathOf, type SystemView } from "./system.ts";

const text = z.string().max(1024);
const ManagerClockSchema = z.looseObject({
  DateTime: text.nullable().optional(),
  DateTimeLocalOffset: text.nullable().optional(),
});

export interface BmcClock {
  /** The Manager's DateTime as it wrote it. */
  dateTime: string;
  localOffset: string | null;
  /** BMC minus conductor, in ms, measured at the middle of the request (± half its round trip). */
  offsetMs: number;
}

/** The Manager that runs the system: the first of its ManagedBy links. @throws RedfishError where none */
async function managerOf(view: SystemView): Promise<string> {
  const path = managerPathOf(view.system);
  if (!path)
    throw new RedfishError(`Redfish system ${view.path} names no Manager (Links.ManagedBy)`, { status: 200 });
  return path;
}

/**
 * Reads the BMC's clock (Manager.DateTime) and how far it is off the conductor's.
 * @throws RedfishError (also where the Manager has no DateTime)
 */
export async function readBmcClock(
  connections: RedfishConnections,
  node: DriverNode,
  options: CallOptions & { now?: () => number } = {},
): Promise<BmcClock> {
  const now = options.now ?? Date.now;
  const view = await loadSystem(connections, node, options.signal);
  const path = await managerOf(view);
  const before = now();
  const manager = await view.client.get(path, ManagerClockSchema, options.signal);
  const after = now();
  const at = manager.DateTime ? Date.parse(manager.DateTime) : NaN;
  if (!manager.DateTime || Number.isNaN(at))
    throw new RedfishError(`Redfish manager ${path} has no readable DateTime`, { status: 200 });
  return {
    dateTime: manager.DateTime,
    localOffset: manager.DateTimeLocalOffset ?? null,
    offsetMs: at - (before + after) / 2,
  };
}

/**
 * Ironic's set_bmc_clock: PATCHes Manager.DateTime (whole seconds where the BMC writes no fraction, as
 * Ironic strips microseconds) and DateTimeLocalOffset, then reads it back.
 * @throws RedfishError when the BMC refuses or reads back another time ("mismatch after setting datetime")
 */
export async function setBmcClock(
  connections: RedfishConnections,
  node: DriverNode,
  request: { targetDatetime?: string; localOffset?: string; signal?: AbortSignal },
): Promise<void> {
  const view = await loadSystem(connections, node, request.signal);
  const path = await managerOf(view);
  const current = await view.client.get(path, ManagerClockSchema, request.signal);
  let target = request.targetDatetime ?? new Date().toISOString();
  const wanted = Date.parse(target);
  if (Number.isNaN(wanted))
    throw new RedfishError(`target_datetime ${target} is not an ISO 8601 time`, { status: 0 });
  if (current.DateTime && !/\.\d+/.test(current.DateTime))
    target = new Date(Math.floor(wanted / 1000) * 1000).toISOString().replace(".000Z", "+00:00");
  const body: Record<string, string> = { DateTime: target };
  if (request.localOffset !== undefined) body.DateTimeLocalOffset = request.localOffset;
  await view.client.request({ method: "PATCH", path, body, signal: request.signal });
  const after = await view.client.get(path, ManagerClockSchema, request.signal);
  const readBack = after.DateTime ? Date.parse(after.DateTime) : NaN;
  // the BMC's clock has ticked since: a read-back within 5 s of the target is the target
  if (Number.isNaN(readBack) || Math.abs(readBack - Date.parse(target)) > 5000)
    throw new RedfishError(
      `BMC clock update failed: mismatch after setting datetime (wrote ${target}, read ${after.DateTime ?? "nothing"})`,
      { status: 200 },
    );
}

const ClockArgs = z.object({
  target_datetime: z
    .string()
    .max(64)
    .refine((value) => !Number.isNaN(Date.parse(value)), "not an ISO 8601 date and time")
    .describe("The date and time to set, ISO 8601 (e.g. 2026-11-26T12:00:00+00:00)."),
  datetime_local_offset: z
    .string()
    .regex(/^[+-]\d{2}:\d{2}$/, "not an offset like +05:30")
    .optional()
    .describe("The BMC's local offset from UTC, as +HH:MM or -HH:MM."),
});

/** Ironic's management.set_bmc_clock manual clean step (priority 0: only when asked for). */
export function bmcClockSteps(connections: RedfishConnections): Step[] {
  return [
    defineStep({
      kind: "clean",
      interface: "management",
      step: "set_bmc_clock",
      priority: 0,
      args: ClockArgs,
      async run(task, args) {
        await setBmcClock(connections, await task.driverNode(), {
          targetDatetime: args.target_datetime,
          localOffset: args.datetime_local_offset,
          signal: task.signal,
        });
      },
    }),
  ];
}
