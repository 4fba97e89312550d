import { afterEach, describe, expect, it } from "vitest";
import {
  api,
  faultOf,
  provisionThrough,
  released,
  startConductor,
  waitForState,
} from "../helpers/conductor.ts";

/**
 * A client that acts on what it just read is not refused for a lock that is being let go: a request that finds
 * its node locked waits out Ironic's node_locked_retry window (3 attempts, 1 s apart) before 409 NodeLocked,
 * and goes through as soon as the holder releases the node. fake-hardware's delay keeps the power task on
 * its lock for 400 ms; without the wait every request below is refused at once.
 */

type Ctx = Awaited<ReturnType<typeof startConductor>>;
let ctx: Ctx | undefined;
afterEach(async () => {
  await ctx?.stop();
  ctx = undefined;
});

async function nodeHeldByPower(): Promise<{ url: string; uuid: string }> {
  ctx = await startConductor({ fakeDelayMs: 400 });
  const { url } = ctx;
  const created = await api(`${url}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware" } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const uuid = (created.body as { uuid: string }).uuid;
  await released(url, uuid);
  const power = await api(`${url}/v1/nodes/${uuid}/states/power`, {
    method: "PUT",
    body: { target: "power on" },
  });
  expect(power.status, JSON.stringify(power.body)).toBe(202);
  // the power task holds the node now
  const held = await api(`${url}/v1/nodes/${uuid}`);
  expect((held.body as { reservation: string | null }).reservation).not.toBeNull();
  return { url, uuid };
}

describe("a request on a node whose lock is being released", () => {
  it("a provision verb sent while a power task holds the node goes through once it lets go", async () => {
    const { url, uuid } = await nodeHeldByPower();
    const manage = await api(`${url}/v1/nodes/${uuid}/states/provision`, {
      method: "PUT",
      body: { target: "manage" },
    });
    expect(manage.status, JSON.stringify(manage.body)).toBe(202);
    await waitForState(url, uuid, "manageable");
    // the power change the verb waited for had completed
    const node = await api(`${url}/v1/nodes/${uuid}`);
    expect((node.body as { power_state: string }).power_state).toBe("power on");
  });

  it("a PATCH sent while a power task holds the node is applied once it lets go", async () => {
    const { url, uuid } = await nodeHeldByPower();
    const patch = await api(`${url}/v1/nodes/${uuid}`, {
      method: "PATCH",
      body: [{ op: "add", path: "/extra/after", value: "the power task" }],
    });
    expect(patch.status, JSON.stringify(patch.body)).toBe(200);
    const body = patch.body as { extra: Record<string, string>; power_state: string; reservation: null };
    expect(body.extra.after).toBe("the power task");
    expect(body.power_state).toBe("power on");
  });

  it("a DELETE sent while a power task holds the node deletes it once it lets go", async () => {
    const { url, uuid } = await nodeHeldByPower();
    const deleted = await api(`${url}/v1/nodes/${uuid}`, { method: "DELETE" });
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(204);
    expect((await api(`${url}/v1/nodes/${uuid}`)).status).toBe(404);
  });

  it("a port and a port group created while a power task holds their node are made once it lets go", async () => {
    const { url, uuid } = await nodeHeldByPower();
    const port = await api(`${url}/v1/ports`, {
      method: "POST",
      body: { node_uuid: uuid, address: "52:54:00:aa:bb:01" },
    });
    expect(port.status, JSON.stringify(port.body)).toBe(201);
    const power = await api(`${url}/v1/nodes/${uuid}/states/power`, {
      method: "PUT",
      body: { target: "power off" },
    });
    expect(power.status).toBe(202);
    const group = await api(`${url}/v1/portgroups`, {
      method: "POST",
      body: { node_uuid: uuid, name: "bond0" },
    });
    expect(group.status, JSON.stringify(group.body)).toBe(201);
  });

  it("a lock held past the window is still NodeLocked (409) with Ironic's text", async () => {
    ctx = await startConductor({ fakeDelayMs: 1500, nodeLockedRetry: { attempts: 2, intervalS: 0.2 } });
    const { url } = ctx;
    const created = await api(`${url}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware" } });
    expect(created.status).toBe(201);
    const uuid = (created.body as { uuid: string }).uuid;
    await provisionThrough(url, uuid, [["manage", "manageable"]]);
    const power = await api(`${url}/v1/nodes/${uuid}/states/power`, {
      method: "PUT",
      body: { target: "power on" },
    });
    expect(power.status).toBe(202);
    const refused = await api(`${url}/v1/nodes/${uuid}/states/provision`, {
      method: "PUT",
      body: { target: "provide" },
    });
    expect(refused.status).toBe(409);
    expect(faultOf(refused.body)).toMatch(
      /^Node [0-9a-f-]+ is locked by host .+, please retry after the current/,
    );
    await released(url, uuid);
    expect((await api(`${url}/v1/nodes/${uuid}`)).body).toMatchObject({ provision_state: "manageable" });
  });
});
