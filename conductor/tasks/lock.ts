import type { NodeRecord } from "../../shared/resources.ts";
import type { HardwareType } from "../drivers/hardware-type.ts";
import { lockWaitMs, ReleaseSignals, whileLocked } from "./lock-wait.ts";
import { Task, type TaskDeps } from "./task.ts";

/** Work that runs in the background under a node's lock. */
export type TaskWork = (task: Task) => Promise<void>;

/**
 * `wait`: a request (the API's): while another task holds the node, try again for up to Ironic's
 * node_locked_retry window before NodeLocked, so a client that acts on a state a task just wrote is not refused
 * for the few ms until that task's release. Background sweeps take the default and skip a locked node at once.
 */
export interface AcquireOptions {
  wait?: boolean;
}

interface Running {
  task: Task;
  purpose: string;
  done: Promise<void>;
}

/**
 * Takes and gives back node locks in one place (Ironic's task_manager.acquire): `acquire` reserves the node,
 * `run` executes a body under the lock and releases it afterwards — unless the body called `spawnAfter`,
 * in which case the spawned work owns the lock and releases it when it settles, whatever it does.
 */
export class TaskManager {
  private readonly running = new Map<string, Running>();
  /** Requests waiting here for a node's release (`acquire` with `wait`, and record changes). */
  readonly releases = new ReleaseSignals();

  constructor(
    private readonly deps: TaskDeps,
    private readonly hardwareOf: (node: NodeRecord) => HardwareType,
    /** Called after a spawned work released its node (agents that called back meanwhile are resumed). */
    private readonly onReleased: (uuid: string) => Promise<void> = async () => undefined,
  ) {}

  /** Reserves the node for this conductor. @throws NodeLocked (409), NodeNotFound (404), Invalid (unknown driver) */
  async acquire(node: NodeRecord, purpose: string, options: AcquireOptions = {}): Promise<NodeLock> {
    const hw = this.hardwareOf(node);
    const reserve = () => this.deps.store.reserveNode(node.uuid, this.deps.holder);
    const reserved = options.wait ? await this.whileLocked(node.uuid, reserve) : await reserve();
    return new NodeLock(new Task(reserved, hw, this.deps), purpose, this);
  }

  /**
   * Runs `attempt` again while it throws NodeLocked, within the config's nodeLockedRetry window: at once when
   * this conductor releases the node, else every 100 ms. @throws NodeLocked once the window has passed
   */
  whileLocked<T>(uuid: string, attempt: () => Promise<T>): Promise<T> {
    const waitMs = lockWaitMs(this.deps.config.nodeLockedRetry);
    return whileLocked(attempt, { uuid, waitMs, self: this.deps.holder, signals: this.releases });
  }

  /**
   * A shared (read) handle, Ironic's `acquire(shared=True)`: reserves nothing, so a holder of the exclusive lock
   * is not waited for, but its task refuses writes and power (both need the exclusive lock). For reads that
   * touch hardware (the boot device, validation). @throws Invalid (unknown driver)
   */
  acquireShared(node: NodeRecord, purpose: string): NodeLock {
    return new NodeLock(Task.shared(node, this.hardwareOf(node), this.deps), purpose, this);
  }

  /** The background work holding a node's lock here, if any. */
  runningTask(uuid: string): Task | undefined {
    return this.running.get(uuid)?.task;
  }

  isRunning(uuid: string): boolean {
    return this.running.has(uuid);
  }

  /** Waits until no work is running (tests, shutdown). */
  async settle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.values()].map((r) => r.done));
  }

  /** Cancels running work (shutdown). */
  abortAll(reason: string): void {
    for (const { task } of this.running.values()) task.abort(reason);
  }

  /** @internal NodeLock's: gives the reservation back; never throws. */
  async release(task: Task): Promise<void> {
    if (!task.held) return; // shared: nothing was reserved
    task.released();
    await this.deps.store
      .releaseNode(task.node.uuid, this.deps.holder)
      .catch((error: unknown) => task.log.error({ err: error }, "release failed"));
    this.releases.released(task.node.uuid);
  }

  /** @internal NodeLock's: runs the work, then releases, whatever it does. */
  spawn(task: Task, purpose: string, work: TaskWork): void {
    const uuid = task.node.uuid;
    const done = (async () => {
      try {
        await work(task);
      } catch (error) {
        task.log.error({ err: error, purpose }, "background work failed");
      } finally {
        this.running.delete(uuid);
        await this.release(task);
        await this.onReleased(uuid).catch((error: unknown) =>
          task.log.error({ err: error }, "after-release hook failed"),
        );
      }
    })();
    this.running.set(uuid, { task, purpose, done });
  }
}

/** One acquired node lock: a handle with the task it guards. */
export class NodeLock {
  private spawned: TaskWork | null = null;
  private used = false;

  constructor(
    readonly task: Task,
    readonly purpose: string,
    private readonly manager: TaskManager,
  ) {}

  /** Hands the lock to `work`, started once the body of `run` returns; the work releases it when it settles. */
  spawnAfter(work: TaskWork): void {
    if (!this.task.held) throw new Error("a shared node lock cannot hand work to the background");
    this.spawned = work;
  }

  /**
   * Runs `body` under the lock. A throw releases the lock (nothing is spawned) and propagates; otherwise the
   * spawned work (if any) starts and owns the lock, or the lock is released now.
   */
  async run<T>(body: (task: Task) => Promise<T>): Promise<T> {
    if (this.used) throw new Error("a node lock handle runs once");
    this.used = true;
    let result: T;
    try {
      result = await body(this.task);
    } catch (error) {
      this.spawned = null;
      await this.manager.release(this.task);
      throw error;
    }
    const work = this.spawned;
    if (work) this.manager.spawn(this.task, this.purpose, work);
    else await this.manager.release(this.task);
    return result;
  }
}
