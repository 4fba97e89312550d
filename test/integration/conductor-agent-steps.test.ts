import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureAgentBuilt, type AgentProcess } from "../helpers/agent.ts";
import { api, startConductor, waitForState } from "../helpers/conductor.ts";
import { enrollSimulatedNode } from "../helpers/simulated-node.ts";

/** The agent's steps as the conductor shows them, before and after the agent (simulated hardware) reports them. */
describe("agent steps from the one catalogue", () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-agent-steps-"));
  let executable = "";
  const agents: AgentProcess[] = [];
  let macCounter = 1;

  beforeAll(async () => {
    executable = await ensureAgentBuilt();
  }, 300_000);
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.stop();
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  async function enroll(
    ctx: Awaited<ReturnType<typeof startConductor>>,
    name: string,
    options: { smartFailing?: boolean; body?: Record<string, unknown> } = {},
  ) {
    const mac = `52:54:00:00:07:${(macCounter++).toString(16).padStart(2, "0")}`;
    const node = await enrollSimulatedNode({ url: ctx.url, dir, name, mac, executable, ...options });
    return { ...node, boot: () => agents.push(node.boot()) };
  }

  const provision = (url: string, node: string, body: Record<string, unknown>) =>
    api(`${url}/v1/nodes/${node}/states/provision`, { method: "PUT", body });
  const stepsOf = async (url: string, node: string, kind: string) =>
    ((await api(`${url}/v1/nodes/${node}/steps?kind=${kind}`)).body as { steps: unknown[] }).steps;

  it("GET …/steps shows the same deploy plan before and after the agent calls back", async () => {
    const ctx = await startConductor();
    try {
      const node = await enroll(ctx, "same", { body: { automated_clean: false } });
      await api(`${ctx.url}/v1/nodes/same`, {
        method: "PATCH",
        // never fetched: the deploy holds before write_image
        body: [{ op: "add", path: "/instance_info/image_source", value: "http://127.0.0.1:9/none.raw" }],
      });
      await provision(ctx.url, "same", { target: "manage" });
      await waitForState(ctx.url, "same", "manageable");
      await provision(ctx.url, "same", { target: "provide" });
      await waitForState(ctx.url, "same", "available");
      const accepted = await provision(ctx.url, "same", {
        target: "active",
        deploy_steps: [{ interface: "deploy", step: "hold", priority: 90 }],
      });
      expect(accepted.status).toBe(202);
      await waitForState(ctx.url, "same", "wait call-back");
      const before = await stepsOf(ctx.url, "same", "deploy");
      node.boot();
      const held = await waitForState(ctx.url, "same", "deploy hold");
      expect(held.last_error).toBeNull();
      const after = await stepsOf(ctx.url, "same", "deploy");
      expect(after).toEqual(before);
      expect(after).toMatchObject([
        { interface: "deploy", step: "hold", priority: 90 },
        { interface: "deploy", step: "write_image", priority: 80 },
        { interface: "deploy", step: "install_bootloader", priority: 60 },
        { interface: "deploy", step: "boot_instance", priority: 20 },
      ]);
      // the agent was asked for its list, and it was recorded (so `after` is the merged plan, not the first)
      const internal = (await ctx.conductor.store.getNode(node.uuid))!.driver_internal_info;
      expect(internal.deploy_steps_discovered).toBe(true);
      expect(Array.isArray(internal.agent_cached_deploy_steps)).toBe(true);
    } finally {
      await ctx.stop();
    }
  });

  it("check_smart_health passes a healthy disk and keeps what the agent read", async () => {
    const ctx = await startConductor();
    try {
      const node = await enroll(ctx, "healthy");
      await provision(ctx.url, "healthy", { target: "manage" });
      await waitForState(ctx.url, "healthy", "manageable");
      await provision(ctx.url, "healthy", {
        target: "clean",
        clean_steps: [{ interface: "deploy", step: "check_smart_health" }],
      });
      await waitForState(ctx.url, "healthy", "clean wait");
      node.boot();
      const done = await waitForState(ctx.url, "healthy", "manageable");
      expect(done.last_error).toBeNull();
      const internal = (await ctx.conductor.store.getNode(node.uuid))!.driver_internal_info;
      expect(internal.check_smart_health_result).toEqual({
        devices: [{ device: node.disk, health: "passed" }],
      });
    } finally {
      await ctx.stop();
    }
  });

  it("check_smart_health fails manual cleaning, naming the disk SMART reports failing", async () => {
    const ctx = await startConductor();
    try {
      const node = await enroll(ctx, "failing", { smartFailing: true });
      await provision(ctx.url, "failing", { target: "manage" });
      await waitForState(ctx.url, "failing", "manageable");
      const bad = await provision(ctx.url, "failing", {
        target: "clean",
        clean_steps: [{ interface: "deploy", step: "check_smart_health", args: { devices: "all" } }],
      });
      expect(bad.status).toBe(400);
      await provision(ctx.url, "failing", {
        target: "clean",
        clean_steps: [{ interface: "deploy", step: "check_smart_health" }],
      });
      await waitForState(ctx.url, "failing", "clean wait");
      node.boot();
      const failed = await waitForState(ctx.url, "failing", "clean failed");
      expect(String(failed.last_error)).toContain("check_smart_health");
      expect(String(failed.last_error)).toContain(`${node.disk} failing`);
    } finally {
      await ctx.stop();
    }
  });
});
