import { describe, expect, it } from "vitest";
import { newNode } from "../../conductor/operations/node-record.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { NodeLocked } from "../../conductor/db/store.ts";
import { SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { fakeHardware } from "../../conductor/drivers/registry.ts";
import { TaskManager } from "../../conductor/tasks/lock.ts";
import { PowerWithoutLock, applyPower } from "../../conductor/tasks/power.ts";
import { silentLogger } from "../../shared/log.ts";
import { FakeAgents } from "../helpers/step-harness.ts";

function setup() {
  const config = defaultConfig();
  const store = new SqliteStore(":memory:");
  const hw = fakeHardware(config);
  const released: string[] = [];
  const manager = new TaskManager(
    {
      store,
      holder: "c1",
      logger: silentLogger,
      agents: new FakeAgents(),
      config,
      publicUrl: () => "http://127.0.0.1:1",
      publish: () => undefined,
      sign: () => "http://signed.invalid/",
    },
    () => hw,
    async (uuid) => void released.push(uuid),
  );
  const create = () => store.createNode(newNode({ driver: "fake-hardware" }, hw));
  const reservation = async (uuid: string) => (await store.getNode(uuid))?.reservation;
  return { manager, create, reservation, released };
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
