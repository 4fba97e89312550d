import { NodeLocked } from "../db/store.ts";

/** Ironic's [conductor]node_locked_retry_attempts and node_locked_retry_interval (the config's nodeLockedRetry). */
export interface LockRetry {
  attempts: number;
  intervalS: number;
}

/** How long a request may wait for a held lock: Ironic's window, (attempts − 1) intervals. */
export const lockWaitMs = (retry: LockRetry): number =>
  Math.max(0, retry.attempts - 1) * retry.intervalS * 1000;

/**
 * A holder on another conductor cannot tell this one when it lets go: the lock is tried again this often. NOTE:
 * Ironic sleeps the whole interval (1 s) between tries; a finished task's two writes (its state, then the
 * release) are milliseconds apart, and a client that saw the state and acted on it waited that second.
 */
const POLL_MS = 100;

/** Who waits for which node's release on this conductor: woken by the TaskManager's release, not by a timer. */
export class ReleaseSignals {
  private readonly waiting = new Map<string, Set<() => void>>();

  /** The node's reservation was given back here. */
  released(uuid: string): void {
    const wakes = this.waiting.get(uuid);
    if (wakes === undefined) return;
    this.waiting.delete(uuid);
    for (const wake of wakes) wake();
  }

  /** Resolves when this conductor releases `uuid`, or after `ms`, whichever is first. */
  next(uuid: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      let wakes = this.waiting.get(uuid);
      if (wakes === undefined) this.waiting.set(uuid, (wakes = new Set()));
      const wake = (): void => {
        clearTimeout(timer);
        wakes.delete(wake);
        if (wakes.size === 0 && this.waiting.get(uuid) === wakes) this.waiting.delete(uuid);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      wakes.add(wake);
    });
  }

  /** Nodes someone waits for (tests: nothing is left waiting). */
  get size(): number {
    return this.waiting.size;
  }
}

/**
 * Runs `attempt` and, while it throws NodeLocked, runs it again until `waitMs` has passed; the last NodeLocked
 * is thrown then. Between tries it waits for this conductor's release of the node when `self` holds it (a task
 * here: no store read until it lets go), else polls. Any other error is thrown at once.
 */
export async function whileLocked<T>(
  attempt: () => Promise<T>,
  wait: { uuid: string; waitMs: number; self: string; signals: ReleaseSignals },
): Promise<T> {
  const deadline = performance.now() + wait.waitMs;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      const left = deadline - performance.now();
      if (!(error instanceof NodeLocked) || left <= 0) throw error;
      const mine = error.holder === wait.self;
      await wait.signals.next(wait.uuid, mine ? left : Math.min(left, POLL_MS));
    }
  }
}
