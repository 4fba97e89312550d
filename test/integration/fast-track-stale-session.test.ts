import { describe, expect, it } from "vitest";
import { api, powerSettled, provisionThrough, startConductor, waitForState } from "../helpers/conductor.ts";
import { RawAgent } from "../helpers/raw-agent.ts";

const MAC = "52:54:00:29:00:02";

/**
 * A node in `manageable`, powered on, whose ramdisk agent said hello and then went silent, as an agent does
 * whose machine was reset: its TCP connection looks open until the heartbeat timeout (30 s) cuts it.
 */
async function nodeWithSilentAgent(url: string): Promise<{ uuid: string; agent: RawAgent }> {
  const created = await api(`${url}/v1/nodes`, {
    method: "POST",
    body: {
      driver: "fake-hardware",
      deploy_interface: "direct",
      automated_clean: false,
      instance_info: { image_source: "http://127.0.0.1:9/none.raw" },
    },
  });
  expect(created.status).toBe(201);
  const uuid = (created.body as { uuid: string }).uuid;
  expect(
    (await api(`${url}/v1/ports`, { method: "POST", body: { node_uuid: uuid, address: MAC } })).status,
  ).toBe(201);
  const manage = await api(`${url}/v1/nodes/${uuid}/states/provision`, {
    method: "PUT",
    body: { target: "manage" },
  });
  expect(manage.status).toBe(202);
  await waitForState(url, uuid, "manageable");
  const on = await api(`${url}/v1/nodes/${uuid}/states/power`, {
    method: "PUT",
    body: { target: "power on" },
  });
  expect(on.status).toBe(202);
  await powerSettled(url, uuid, "power on");
  const agent = await RawAgent.connect(url.replace("http://", "ws://") + "/v1/agent");
  agent.hello({ macs: [MAC], bootId: "ramdisk-boot-1" });
  await agent.next("welcome");
  return { uuid, agent };
}

describe("fast track after a reboot", () => {
  it("a power action retires the node's agent session at once, so the next deploy boots the ramdisk instead of talking to the dead agent", async () => {
    const ctx = await startConductor({ agent: { fastTrack: true } });
    try {
      const { uuid, agent } = await nodeWithSilentAgent(ctx.url);
      expect(ctx.conductor.gateway.isConnected(uuid)).toBe(true);

      // the instance is rebooted: the ramdisk's agent is gone, though its socket would look open for 30 s
      const reboot = await api(`${ctx.url}/v1/nodes/${uuid}/states/power`, {
        method: "PUT",
        body: { target: "rebooting" },
      });
      expect(reboot.status).toBe(202);
      await powerSettled(ctx.url, uuid, "power on");
      expect(ctx.conductor.gateway.isConnected(uuid)).toBe(false);
      expect(await agent.closed()).toBe(1006); // cut, not closed politely: a dead agent answers nothing

      // provide and deploy at once: no fast track onto the dead session, the ramdisk is booted and awaited
      await provisionThrough(ctx.url, uuid, [
        ["provide", "available"],
        ["active", "wait call-back"],
      ]);
    } finally {
      await ctx.stop();
    }
  });
});
