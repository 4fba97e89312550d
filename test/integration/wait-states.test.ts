import { afterEach, describe, expect, it } from "vitest";
import { api, startConductor, waitForState } from "../helpers/conductor.ts";

/** Wait states never trap a node: an operator can abort, and a timeout fails it. No agent ever calls back here. */
describe("nodes waiting for an agent", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>> | undefined;
  afterEach(async () => {
    await ctx?.stop();
    ctx = undefined;
  });

  async function nodeInWaitCallBack(
    c: Awaited<ReturnType<typeof startConductor>>,
    name: string,
  ): Promise<void> {
    const created = await api(`${c.url}/v1/nodes`, {
      method: "POST",
      body: {
        name,
        driver: "fake-hardware",
        deploy_interface: "direct",
        instance_info: { image_source: "http://127.0.0.1:9/x.raw" },
        automated_clean: false,
      },
    });
    expect(created.status).toBe(201);
    const uuid = (created.body as { uuid: string }).uuid;
    await api(`${c.url}/v1/ports`, {
      method: "POST",
      body: { node_uuid: uuid, address: `52:54:00:00:0e:${name.length.toString(16).padStart(2, "0")}` },
    });
    for (const [target, state] of [
      ["manage", "manageable"],
      ["provide", "available"],
      ["active", "wait call-back"],
    ] as const) {
      expect(
        (await api(`${c.url}/v1/nodes/${name}/states/provision`, { method: "PUT", body: { target } })).status,
      ).toBe(202);
      await waitForState(c.url, name, state);
    }
  }

  it("abort from wait call-back lands in deploy failed, powered off, unlocked", async () => {
    ctx = await startConductor();
    await nodeInWaitCallBack(ctx, "ab");
    const before = (await api(`${ctx.url}/v1/nodes/ab`)).body as Record<string, unknown>;
    expect(before.power_state).toBe("power on");
    expect(before.reservation).toBeNull();
    expect(
      (
        await api(`${ctx.url}/v1/nodes/ab/states/provision`, {
          method: "PUT",
          headers: { "X-OpenStack-Ironic-API-Version": "1.110" },
          body: { target: "abort" },
        })
      ).status,
    ).toBe(202);
    const node = (await api(`${ctx.url}/v1/nodes/ab`)).body as Record<string, unknown>;
    expect(node.provision_state).toBe("deploy failed");
    expect(node.power_state).toBe("power off");
    expect(String(node.last_error)).toMatch(/aborted by operator/);
    expect(node.reservation).toBeNull();
  });

  it("a deploy whose agent never calls back times out into deploy failed", async () => {
    ctx = await startConductor({ timeouts: { deployWaitS: 1 }, timeoutCheckIntervalS: 0.2 });
    await nodeInWaitCallBack(ctx, "timeout");
    const node = await waitForState(ctx.url, "timeout", "deploy failed");
    expect(node.provision_state).toBe("deploy failed");
    expect(String(node.last_error)).toMatch(/Timeout reached while waiting for callback/);
    expect(node.power_state).toBe("power off");
  });
});
