import { describe, expect, it } from "vitest";
import { newNode } from "../../conductor/operations/node-record.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { NodeLocked } from "../../conductor/db/store.ts";
import { defineOperation, underRecordLock } from "../../conductor/operations/operation.ts";
import { ReleaseSignals, lockWaitMs, whileLocked } from "../../conductor/tasks/lock-wait.ts";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { fakeHardware } from "../../conductor/drivers/registry.ts";
import { TaskManager } from "../../conductor/tasks/lock.ts";
import { PowerWithoutLock, applyPower } from "../../conductor/tasks/power.ts";
import { silentLogger } from "../../shared/log.ts";
import { FakeAgents } from "../helpers/step-harness.ts";

/** A manager on a fresh store; its requests wait as `nodeLockedRetry` says (Ironic's node_locked_retry). */
function setup(nodeLockedRetry?: { attempts: number; intervalS: number }) {
  const config = defaultConfig(nodeLockedRetry ? { nodeLockedRetry } : {});
  const store = new SqliteStore(":memory:");
  const hw = fakeHardware(config);
  const released: string[] = [];
  const deps = {
    store,
    holder: "c1",
    logger: silentLogger,
    agents: new FakeAgents(),
    config,
    publicUrl: () => "http://127.0.0.1:1",
    publish: () => undefined,
    sign: () => "http://signed.invalid/",
  };
  const manager = new TaskManager(
    deps,
    () => hw,
    async (uuid) => void released.push(uuid),
  );
  const create = () => store.createNode(newNode({ driver: "fake-hardware" }, hw));
  const reservation = async (uuid: string) => (await store.getNode(uuid))?.reservation;
  return { manager, store, create, reservation, released, ctx: { deps, tasks: manager } };
}

describe("the node lock handle", () => {
  it("holds the node while the body runs and releases it when the body returns", async () => {
    const { manager, create, reservation } = setup();
    const node = await create();
    const lock = await manager.acquire(node, "test");
    const seen = await lock.run(async () => reservation(node.uuid));
    expect(seen).toBe("c1");
    expect(await reservation(node.uuid)).toBeNull();
  });

  it("refuses a second holder while locked", async () => {
    const { manager, create } = setup();
    const node = await create();
    const lock = await manager.acquire(node, "first");
    await expect(manager.acquire(node, "second")).rejects.toBeInstanceOf(NodeLocked);
    await lock.run(async () => undefined);
    await expect(manager.acquire(node, "third")).resolves.toBeDefined();
  });

  it("releases when the body throws, and spawns nothing", async () => {
    const { manager, create, reservation } = setup();
    const node = await create();
    const lock = await manager.acquire(node, "test");
    let spawned = false;
    await expect(
      lock.run(async () => {
        lock.spawnAfter(async () => void (spawned = true));
        throw new Error("bad request");
      }),
    ).rejects.toThrow("bad request");
    await manager.settle();
    expect(spawned).toBe(false);
    expect(await reservation(node.uuid)).toBeNull();
  });

  it("hands the lock to spawned work and releases it when the work succeeds", async () => {
    const { manager, create, reservation, released } = setup();
    const node = await create();
    const lock = await manager.acquire(node, "test");
    let during: string | null | undefined;
    await lock.run(async () => {
      lock.spawnAfter(async () => void (during = await reservation(node.uuid)));
    });
    expect(manager.isRunning(node.uuid)).toBe(true);
    await manager.settle();
    expect(during).toBe("c1");
    expect(await reservation(node.uuid)).toBeNull();
    expect(released).toEqual([node.uuid]);
    expect(manager.isRunning(node.uuid)).toBe(false);
  });

  it("releases when the spawned work throws", async () => {
    const { manager, create, reservation } = setup();
    const node = await create();
    const lock = await manager.acquire(node, "test");
    await lock.run(async () => lock.spawnAfter(() => Promise.reject(new Error("boom"))));
    await manager.settle();
    expect(await reservation(node.uuid)).toBeNull();
  });

  it("runs a handle once", async () => {
    const { manager, create } = setup();
    const lock = await manager.acquire(await create(), "test");
    await lock.run(async () => undefined);
    await expect(lock.run(async () => undefined)).rejects.toThrow("runs once");
  });

  it("a shared handle reserves nothing, passes an exclusive holder, and refuses writes and power", async () => {
    const { manager, create, reservation } = setup();
    const node = await create();
    const exclusive = await manager.acquire(node, "deploy");
    const shared = manager.acquireShared(node, "validate");
    await shared.run(async (task) => {
      expect(task.held).toBe(false);
      await expect(task.update({ description: "x" })).rejects.toThrow(/exclusive lock/);
      await expect(applyPower(task, "power on")).rejects.toBeInstanceOf(PowerWithoutLock);
      expect(() => shared.spawnAfter(async () => undefined)).toThrow(/shared/);
    });
    expect(await reservation(node.uuid)).toBe("c1"); // the exclusive holder still has it
    await exclusive.run(async () => undefined);
    expect(await reservation(node.uuid)).toBeNull();
  });

  it("powers only while the lock is held: a task kept past its release is refused", async () => {
    const { manager, create } = setup();
    const node = await create();
    const lock = await manager.acquire(node, "power");
    const kept = await lock.run(async (task) => {
      expect(await applyPower(task, "power on")).toBe("power on");
      return task;
    });
    expect(kept.node.power_state).toBe("power on");
    await expect(applyPower(kept, "power off")).rejects.toBeInstanceOf(PowerWithoutLock);
  });
});

const EDIT = defineOperation({ purpose: "node update", shared: false, onOwner: false });
// NOTE: an hour: a wait that ended only by its timer would outlast the test, so these pass only when the
// release itself wakes the waiter
const HOUR = { attempts: 2, intervalS: 3600 };

describe("a request waits out a node lock that is being released (Ironic's node_locked_retry)", () => {
  it("the window is (attempts − 1) intervals; one attempt waits not at all", () => {
    expect(lockWaitMs({ attempts: 3, intervalS: 1 })).toBe(2000);
    expect(lockWaitMs({ attempts: 1, intervalS: 5 })).toBe(0);
    expect(defaultConfig().nodeLockedRetry).toEqual({ attempts: 3, intervalS: 1 });
  });

  it("takes the lock when this conductor's holder lets go, woken by the release", async () => {
    const { manager, create } = setup(HOUR);
    const node = await create();
    const first = await manager.acquire(node, "deploy");
    const order: string[] = [];
    const second = manager.acquire(node, "provide", { wait: true }).then((lock) => {
      order.push("second acquired");
      return lock;
    });
    await first.run(async () => void order.push("first ran"));
    const lock = await second;
    await lock.run(async (task) => expect(task.node.reservation).toBe("c1"));
    expect(order).toEqual(["first ran", "second acquired"]);
    expect(manager.releases.size).toBe(0);
  });

  it("takes the lock a holder elsewhere gives back, by polling the store", async () => {
    const { manager, store, create } = setup(HOUR);
    const node = await create();
    await store.reserveNode(node.uuid, "another-conductor");
    const waiting = manager.acquire(node, "provide", { wait: true });
    setTimeout(() => void store.releaseNode(node.uuid, "another-conductor"), 150);
    const lock = await waiting;
    await lock.run(async (task) => expect(task.node.reservation).toBe("c1"));
  });

  it("is refused NodeLocked once the window has passed, and leaves no waiter behind", async () => {
    const { manager, store, create } = setup({ attempts: 3, intervalS: 0.1 });
    const node = await create();
    await store.reserveNode(node.uuid, "another-conductor");
    const t = performance.now();
    await expect(manager.acquire(node, "provide", { wait: true })).rejects.toBeInstanceOf(NodeLocked);
    // it did wait: at least the 200 ms window (no upper bound: the machine may be slow)
    expect(performance.now() - t).toBeGreaterThanOrEqual(195);
    expect(manager.releases.size).toBe(0);
    expect((await store.getNode(node.uuid))?.reservation).toBe("another-conductor");
  });

  it("a sweep (no wait) and attempts 1 are refused at once", async () => {
    const { manager, store, create } = setup(HOUR);
    const node = await create();
    await store.reserveNode(node.uuid, "another-conductor");
    // with HOUR, a wait here would outlast the test
    await expect(manager.acquire(node, "power sync")).rejects.toBeInstanceOf(NodeLocked);
    const once = setup({ attempts: 1, intervalS: 3600 });
    const other = await once.create();
    await once.store.reserveNode(other.uuid, "another-conductor");
    await expect(once.manager.acquire(other, "provide", { wait: true })).rejects.toBeInstanceOf(NodeLocked);
  });

  it("a record change waits for the release and applies to the node as the holder left it", async () => {
    const { manager, create, ctx } = setup(HOUR);
    const node = await create();
    const holder = await manager.acquire(node, "deploy");
    // the change is computed from the node it finally writes, not the one read while it was locked
    const edit = underRecordLock(
      ctx,
      { ...node, reservation: "c1" },
      {
        spec: EDIT,
        body: (task) => task.update({ description: `${task.node.description ?? "none"} + edit` }),
      },
    );
    await holder.run((task) => task.update({ description: "by the holder" }));
    const written = await edit;
    expect(written.description).toBe("by the holder + edit");
    expect(written.reservation).toBeNull();
  });

  it("a record change on a node deleted while it waited is NodeNotFound, not a write", async () => {
    const { store, create, ctx } = setup({ attempts: 3, intervalS: 0.1 });
    const node = await create();
    await store.reserveNode(node.uuid, "another-conductor");
    const edit = underRecordLock(
      ctx,
      { ...node, reservation: "another-conductor" },
      {
        spec: EDIT,
        body: (task) => task.update({ description: "lost" }),
      },
    );
    await store.releaseNode(node.uuid, "another-conductor");
    await store.deleteNode(node.uuid);
    await expect(edit).rejects.toThrow(/could not be found/);
  });
});

describe("whileLocked", () => {
  it("throws any other error at once, without waiting", async () => {
    const signals = new ReleaseSignals();
    let tries = 0;
    const failing = whileLocked(
      async () => {
        tries++;
        throw new Error("not a lock");
      },
      { uuid: "n", waitMs: 3_600_000, self: "c1", signals },
    );
    await expect(failing).rejects.toThrow("not a lock");
    expect(tries).toBe(1);
    expect(signals.size).toBe(0);
  });

  it("tries again on each release here until the attempt goes through", async () => {
    const signals = new ReleaseSignals();
    let tries = 0;
    const result = whileLocked(
      async () => {
        if (++tries < 3) throw new NodeLocked("n", "c1");
        return "done";
      },
      { uuid: "n", waitMs: 3_600_000, self: "c1", signals },
    );
    for (let i = 0; i < 2; i++) {
      while (signals.size === 0) await new Promise((resolve) => setImmediate(resolve));
      signals.released("n");
    }
    await expect(result).resolves.toBe("done");
    expect(tries).toBe(3);
  });
});
