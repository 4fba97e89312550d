import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureAgentBuilt, type AgentProcess } from "../helpers/agent.ts";
import { api, powerSettled, provisionThrough, startConductor, waitForState } from "../helpers/conductor.ts";
import { enrollSimulatedNode } from "../helpers/simulated-node.ts";

/**
 * 1.87 servicing with the direct deploy interface: the node boots the ramdisk (service wait), the real agent
 * on simulated hardware runs the in-band service step, and the node boots its instance again.
 */
describe("servicing an active node through the agent", () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-service-agent-"));
  const at = { "X-OpenStack-Ironic-API-Version": "1.87" };
  const SMART = { interface: "deploy", step: "smart_check" };
  let executable = "";
  const agents: AgentProcess[] = [];
  let ctx: Awaited<ReturnType<typeof startConductor>>;

  beforeAll(async () => {
    executable = await ensureAgentBuilt();
    ctx = await startConductor();
  }, 300_000);
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.stop();
  });
  afterAll(async () => {
    await ctx?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const provision = (node: string, body: Record<string, unknown>) =>
    api(`${ctx.url}/v1/nodes/${node}/states/provision`, { method: "PUT", headers: at, body });
  const show = async (node: string) =>
    (await api(`${ctx.url}/v1/nodes/${node}`, { headers: at })).body as Record<string, unknown>;

  /** A simulated node adopted as active (its instance "running"), powered on. */
  async function activeNode(name: string, mac: string, smartFailing = false) {
    const node = await enrollSimulatedNode({ url: ctx.url, dir, name, mac, executable, smartFailing });
    await provisionThrough(ctx.url, name, [
      ["manage", "manageable"],
      ["adopt", "active"],
    ]);
    const on = await api(`${ctx.url}/v1/nodes/${name}/states/power`, {
      method: "PUT",
      body: { target: "power on" },
    });
    expect(on.status, JSON.stringify(on.body)).toBe(202);
    // a service request sent while the power task still holds the node's lock is refused 409 NodeLocked
    await powerSettled(ctx.url, name, "power on");
    return { ...node, boot: () => agents.push(node.boot()) };
  }

  it("boots the ramdisk, runs the agent's step, then boots the instance from disk again", async () => {
    const node = await activeNode("svc-ok", "52:54:00:00:08:01");
    const r = await provision("svc-ok", { target: "service", service_steps: [SMART] });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    const waiting = await waitForState(ctx.url, "svc-ok", "service wait");
    expect(waiting.target_provision_state).toBe("active");
    const steps = await api(`${ctx.url}/v1/nodes/svc-ok/steps?kind=service`);
    expect(steps.body).toMatchObject({ kind: "service", steps: [{ ...SMART, requires_ramdisk: true }] });
    node.boot();
    const done = await waitForState(ctx.url, "svc-ok", "active");
    expect(done.last_error).toBeNull();
    expect(await show("svc-ok")).toMatchObject({ service_step: {}, power_state: "power on" });
    const stored = (await ctx.conductor.store.getNode(node.uuid))!;
    expect(stored.driver_internal_info.smart_check_result).toEqual({
      devices: [{ device: node.disk, health: "passed" }],
    });
    expect(stored.driver_internal_info).not.toHaveProperty("service_steps");
    const device = await api(`${ctx.url}/v1/nodes/svc-ok/management/boot_device`);
    expect(device.body).toMatchObject({ boot_device: "disk", persistent: true });
  }, 120_000);

  it("a failing step lands in service failed naming it; abort returns the node to active", async () => {
    const node = await activeNode("svc-bad", "52:54:00:00:08:02", true);
    const r = await provision("svc-bad", { target: "service", service_steps: [SMART] });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    await waitForState(ctx.url, "svc-bad", "service wait");
    node.boot();
    const failed = await waitForState(ctx.url, "svc-bad", "service failed");
    expect(String(failed.last_error)).toContain("failed service step deploy.smart_check");
    expect(String(failed.last_error)).toContain(`${node.disk} failing`);
    // the failure took the node out of the ramdisk and back to its instance, as Ironic's tear_down_service
    expect(await show("svc-bad")).toMatchObject({ service_step: {}, power_state: "power on" });
    const device = await api(`${ctx.url}/v1/nodes/svc-bad/management/boot_device`);
    expect(device.body).toMatchObject({ boot_device: "disk" });
    expect((await provision("svc-bad", { target: "abort" })).status).toBe(202);
    expect(await show("svc-bad")).toMatchObject({
      provision_state: "active",
      last_error: "By request, the service operation was aborted",
    });
  }, 120_000);
});
