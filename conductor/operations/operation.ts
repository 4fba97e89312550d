import type { NodeRecord } from "../../shared/resources.ts";
import type { DriverRegistry, HardwareType } from "../drivers/hardware-type.ts";
import { NodeLocked, NodeNotFound } from "../db/store.ts";
import { Invalid } from "../errors.ts";
import type { NodeLock, TaskManager } from "../tasks/lock.ts";
import type { Task, TaskDeps } from "../tasks/task.ts";

/** What every operation works with: the conductor's node locks and what its tasks may use. */
export interface OperationContext {
  readonly tasks: TaskManager;
  readonly deps: TaskDeps;
  readonly drivers: DriverRegistry;
}

/**
 * How an operation runs, declared once beside it (Ironic's `acquire(purpose=..., shared=...)` and the RPC
 * topic): the API's forwarding reads `onOwner`, `underLock` reads the rest.
 */
export interface OperationSpec {
  /** Names the lock's holder work in logs (Ironic's purpose). */
  readonly purpose: string;
  /**
   * A read that touches hardware: a shared lock, which reserves nothing and does not wait for the exclusive
   * holder; its task refuses writes and power. Anything that writes takes the exclusive lock.
   */
  readonly shared: boolean;
  /** Runs on the conductor owning the node on the hash ring, where its periodic work and agent session live. */
  readonly onOwner: boolean;
  /**
   * A background sweep's (the power sync): a node another task holds is skipped at once. A request's operation
   * waits out Ironic's node_locked_retry window first (lock.ts's AcquireOptions).
   */
  readonly sweep?: boolean;
}

/** Declares an operation's spec (a typed literal, frozen so a route cannot change it). */
export function defineOperation(spec: OperationSpec): OperationSpec {
  return Object.freeze({ ...spec });
}

/**
 * Runs `body` under the node's lock as `spec` says, and releases it afterwards unless the body handed it to
 * background work (`lock.spawnAfter`). The one way an operation reaches a node's driver; new operations
 * (vifs, nmi) are a spec and a body. @throws NodeLocked (409), Invalid (unknown driver), what the body throws
 */
export async function underLock<T>(
  ctx: OperationContext,
  node: NodeRecord,
  operation: { spec: OperationSpec; body: (task: Task, lock: NodeLock) => Promise<T> },
): Promise<T> {
  const { spec, body } = operation;
  const lock = spec.shared
    ? ctx.tasks.acquireShared(node, spec.purpose)
    : await ctx.tasks.acquire(node, spec.purpose, { wait: spec.sweep !== true });
  return lock.run((task) => body(task, lock));
}

/** The node's hardware type. @throws Invalid naming the driver no conductor here supports */
export function hardwareOf(drivers: DriverRegistry, driver: string, group = ""): HardwareType {
  const hw = drivers.get(driver);
  if (!hw) throw new InvalidDriver(driver, group);
  return hw;
}

/** No conductor service here supports the node's driver (Ironic's NoValidHost text, a 400). */
export class InvalidDriver extends Invalid {
  constructor(driver: string, group: string) {
    super(
      `No valid host was found. Reason: No conductor service registered which supports driver ${driver} for conductor group "${group}".`,
    );
  }
}

/** A node under its exclusive lock for a record-only change: no driver is loaded. */
export interface RecordTask {
  readonly node: NodeRecord;
  /** Writes node fields, only while nobody holds the node's lock. @throws NodeLocked */
  update(patch: Partial<NodeRecord>): Promise<NodeRecord>;
}

/**
 * Runs a record-only change (PATCH, maintenance, traits) as Ironic's update_node does under
 * `acquire(load_driver=False)`, without loading the node's driver (a node whose driver is gone can still be
 * fixed). Each write is one conditional store update that succeeds only while nobody holds the node's lock,
 * checked in the write's own transaction: the exclusive lock held for the length of that write, at one write's
 * cost (reserving and releasing around it would be two more, and would rewrite rows a client cannot read
 * back). @throws NodeLocked (409) when the node is locked, what the body throws
 */
export async function underRecordLock<T>(
  ctx: Pick<OperationContext, "deps" | "tasks">,
  node: NodeRecord,
  operation: { spec: OperationSpec; body: (task: RecordTask) => Promise<T> },
): Promise<T> {
  const { store } = ctx.deps;
  let current = node;
  let read = false;
  // NOTE: a body writes once, so one refused by the lock wrote nothing: it runs again on a fresh read
  return ctx.tasks.whileLocked(node.uuid, async () => {
    if (read) current = (await store.getNode(node.uuid)) ?? throwNotFound(node.uuid);
    read = true;
    if (current.reservation !== null) throw new NodeLocked(current.uuid, current.reservation);
    const task: RecordTask = {
      get node() {
        return current;
      },
      update: async (patch) => {
        current = await store.updateNode(node.uuid, patch, { ifReservedBy: null });
        return current;
      },
    };
    return operation.body(task);
  });
}

/**
 * The node once nobody holds its lock (null when there is no such node), for a change that checks rather than
 * takes the lock (ports, port groups): waits out the node_locked_retry window as a request does.
 * @throws NodeLocked (409) when the node stays locked
 */
export function nodeWhenFree(
  ctx: Pick<OperationContext, "deps" | "tasks">,
  uuid: string,
): Promise<NodeRecord | null> {
  return ctx.tasks.whileLocked(uuid, async () => {
    const node = await ctx.deps.store.getNode(uuid);
    if (node !== null && node.reservation !== null) throw new NodeLocked(node.uuid, node.reservation);
    return node;
  });
}

function throwNotFound(uuid: string): never {
  throw new NodeNotFound(uuid);
}
