import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import type { AnvilClient } from "./client.ts";
import { ApiFault, CliError } from "./errors.ts";
import { LiveDisplay } from "./live-display.ts";
import { fetchNode, nodeLabel, type NodeState } from "./node-state.ts";
import type { Sink } from "./output.ts";
import { judge, type WatchGoal } from "./settle.ts";
import type { ServerSentEvent } from "./sse.ts";

const ProvisionEvent = z.looseObject({
  node: z.string(),
  at: z.string().optional(),
  from: z.string().optional(),
  provision_state: z.string(),
  target_provision_state: z.string().nullable().optional(),
});
const Progress = z.looseObject({
  step: z.string().optional(),
  bytes_done: z.number().optional(),
  bytes_total: z.number().nullable().optional(),
  rate_bps: z.number().optional(),
  message: z.string().optional(),
});
const ProgressEvent = z.looseObject({ node: z.string(), step: z.string().optional(), progress: Progress });

/** How often the node is polled: the fallback when events are missing, and the settle check. */
const POLL_MS = 500;
/** Polls that may disagree with the event stream before the poll is believed (events lost). */
const MAX_LAG_POLLS = 4;
/** Stored progress is shown only when the stream has been silent this long. */
const STORED_PROGRESS_AFTER_MS = 3000;

export interface WatchOptions {
  client: AnvilClient;
  node: string;
  sink: Sink;
  goal: WatchGoal;
  /** Seconds; 0 waits forever. */
  timeoutS: number;
  /** The request that starts the work; sent once the event stream is open so no transition is missed. */
  action?: () => Promise<void>;
}

function targetText(target: string | null | undefined): string {
  return target ? ` (target: ${target})` : "";
}

/**
 * Follows a node until it settles: a line per provision state change (from the event stream, or
 * from polling when the stream is unavailable) and write progress while an image is written.
 * Resolves with the settled node once its lock is released (so the next command is accepted).
 * @throws CliError when the node lands in a failed state (message carries last_error) or on timeout;
 *   ApiFault when the action is refused
 */
export async function watchNode(options: WatchOptions): Promise<NodeState> {
  const { client, goal } = options;
  const display = new LiveDisplay(options.sink);
  const controller = new AbortController();
  const deadline = options.timeoutS > 0 ? Date.now() + options.timeoutS * 1000 : Infinity;
  let wake: () => void = () => undefined;
  let streamAlive = false;
  let lastStreamProgress = 0;
  let reachedGoal = false;
  let lastStored = "";

  let node = await fetchNode(client, options.node);
  const label = nodeLabel(node);
  let current = node.provision_state;

  const transition = (to: string, at?: string, target?: string | null): void => {
    display.line(`${current} -> ${to}${targetText(target)}`, at);
    current = to;
    if (goal.state === to) reachedGoal = true;
  };

  const onEvent = (message: ServerSentEvent): void => {
    let data: unknown;
    try {
      data = JSON.parse(message.data);
    } catch {
      return;
    }
    if (message.event === "provision") {
      const event = ProvisionEvent.safeParse(data);
      if (!event.success || event.data.node !== node.uuid) return;
      if (event.data.provision_state !== current || event.data.from === current) {
        transition(event.data.provision_state, event.data.at, event.data.target_provision_state);
      }
      wake();
    } else if (message.event === "progress") {
      const event = ProgressEvent.safeParse(data);
      if (!event.success || event.data.node !== node.uuid) return;
      lastStreamProgress = Date.now();
      display.progress({ ...event.data.progress, step: event.data.step ?? event.data.progress.step });
    }
  };

  try {
    const stream = await client
      .openEvents({ node: node.uuid, signal: controller.signal })
      .catch((error: unknown) => {
        // an older conductor without the stream: polling alone still works
        if (error instanceof ApiFault) return null;
        throw error;
      });
    // NOTE: events published meanwhile wait in the open stream; reading starts after the request was
    // accepted so a refused one prints nothing but its error
    if (options.action) await options.action();
    display.line(`${label}: ${node.provision_state}${targetText(node.target_provision_state)}`);
    if (stream) {
      streamAlive = true;
      void (async () => {
        try {
          for await (const message of stream) onEvent(message);
        } catch {
          // aborted at the end of the watch, or the connection dropped: polling carries on
        } finally {
          streamAlive = false;
          wake();
        }
      })();
    }

    let lagPolls = 0;
    for (;;) {
      node = await fetchNode(client, node.uuid);
      if (node.provision_state !== current && !reachedGoal) {
        // the stream reports transitions in order; a poll only fills in when the stream is gone or behind
        if (!streamAlive || ++lagPolls > MAX_LAG_POLLS) {
          transition(node.provision_state, undefined, node.target_provision_state);
          lagPolls = 0;
        }
      } else lagPolls = 0;

      if (node.provision_state === current || reachedGoal) {
        const verdict = reachedGoal ? { kind: "done" as const } : judge(node, goal);
        if (verdict.kind === "failed") {
          display.finish();
          throw new CliError(`${label}: ${verdict.message}`);
        }
        if (verdict.kind === "done" && (!node.reservation || reachedGoal)) {
          // a goal seen in the stream may already be left behind by the time of this poll
          display.line(`${label} is ${reachedGoal && goal.state ? goal.state : node.provision_state}`);
          return node;
        }
      }

      const stored = node.driver_internal_info?.deploy_progress;
      const storedText = JSON.stringify(stored);
      if (stored && storedText !== lastStored && Date.now() - lastStreamProgress > STORED_PROGRESS_AFTER_MS) {
        lastStored = storedText;
        const progress = Progress.safeParse(stored);
        if (progress.success) display.progress({ step: "write_image", ...progress.data });
      }
      if (Date.now() >= deadline) {
        display.finish();
        throw new CliError(
          `Timed out after ${options.timeoutS}s waiting for ${label} (provision state "${node.provision_state}")`,
        );
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
        void sleep(Math.min(POLL_MS, Math.max(0, deadline - Date.now()))).then(resolve);
      });
    }
  } finally {
    controller.abort();
    display.finish();
  }
}

/**
 * Waits for a power change: until target_power_state is cleared.
 * @throws CliError when the node did not reach `desired` (with last_error) or on timeout
 */
export async function watchPower(options: {
  client: AnvilClient;
  node: string;
  desired: "power on" | "power off";
  timeoutS: number;
}): Promise<NodeState> {
  const deadline = options.timeoutS > 0 ? Date.now() + options.timeoutS * 1000 : Infinity;
  for (;;) {
    const node = await fetchNode(options.client, options.node);
    if (!node.target_power_state && !node.reservation) {
      if (node.power_state === options.desired) return node;
      throw new CliError(
        `${nodeLabel(node)} is "${node.power_state ?? "unknown"}", not "${options.desired}": ${node.last_error ?? "no error was recorded"}`,
      );
    }
    if (Date.now() >= deadline)
      throw new CliError(
        `Timed out after ${options.timeoutS}s waiting for ${nodeLabel(node)} to ${options.desired}`,
      );
    await sleep(200);
  }
}
