import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureAgentBuilt, type AgentProcess } from "../helpers/agent.ts";
import { api, provisionThrough, startConductor, waitForState } from "../helpers/conductor.ts";
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
    options: {
      smartFailing?: boolean;
      burninFailing?: ("cpu" | "memory" | "disk" | "network")[];
      body?: Record<string, unknown>;
    } = {},
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
      const patched = await api(`${ctx.url}/v1/nodes/same`, {
        method: "PATCH",
        // never fetched: the deploy holds before write_image
        body: [{ op: "add", path: "/instance_info/image_source", value: "http://127.0.0.1:9/none.raw" }],
      });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      await provisionThrough(ctx.url, "same", [
        ["manage", "manageable"],
        ["provide", "available"],
      ]);
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

  it("smart_check passes a healthy disk and keeps what the agent read", async () => {
    const ctx = await startConductor();
    try {
      const node = await enroll(ctx, "healthy");
      await provisionThrough(ctx.url, "healthy", [
        ["manage", "manageable"],
        [
          {
            target: "clean",
            clean_steps: [{ interface: "deploy", step: "smart_check" }],
          },
          "clean wait",
        ],
      ]);
      node.boot();
      const done = await waitForState(ctx.url, "healthy", "manageable");
      expect(done.last_error).toBeNull();
      const internal = (await ctx.conductor.store.getNode(node.uuid))!.driver_internal_info;
      expect(internal.smart_check_result).toEqual({
        devices: [{ device: node.disk, health: "passed" }],
      });
    } finally {
      await ctx.stop();
    }
  });

  it("smart_check fails manual cleaning, naming the disk SMART reports failing", async () => {
    const ctx = await startConductor();
    try {
      const node = await enroll(ctx, "failing", { smartFailing: true });
      await provisionThrough(ctx.url, "failing", [["manage", "manageable"]]);
      const bad = await provision(ctx.url, "failing", {
        target: "clean",
        clean_steps: [{ interface: "deploy", step: "smart_check", args: { devices: "all" } }],
      });
      expect(bad.status).toBe(400);
      await provisionThrough(ctx.url, "failing", [
        [
          {
            target: "clean",
            clean_steps: [{ interface: "deploy", step: "smart_check" }],
          },
          "clean wait",
        ],
      ]);
      node.boot();
      const failed = await waitForState(ctx.url, "failing", "clean failed");
      expect(String(failed.last_error)).toContain("smart_check");
      expect(String(failed.last_error)).toContain(`${node.disk} failing`);
    } finally {
      await ctx.stop();
    }
  });

  it("burn-in steps take driver_info's agent_burnin_* knobs, keep their figures and write them to history", async () => {
    const ctx = await startConductor();
    try {
      const node = await enroll(ctx, "burnin", {
        body: {
          driver_info: {
            agent_burnin_cpu_timeout: 7,
            "agent_burnin_vm_vm-bytes": "5%",
            agent_burnin_fio_disk_loops: 1,
            agent_burnin_fio_disk_runtime: 3,
          },
        },
      });
      await provisionThrough(ctx.url, "burnin", [
        ["manage", "manageable"],
        [
          {
            target: "clean",
            clean_steps: [
              { interface: "deploy", step: "burnin_cpu" },
              { interface: "deploy", step: "burnin_memory", args: { timeout: 2 } },
              { interface: "deploy", step: "burnin_disk" },
            ],
          },
          "clean wait",
        ],
      ]);
      node.boot();
      const done = await waitForState(ctx.url, "burnin", "manageable");
      expect(done.last_error).toBeNull();
      const internal = (await ctx.conductor.store.getNode(node.uuid))!.driver_internal_info;
      // the simulated stress-ng counts 400 bogo ops a second (cpu) and 9000 (vm) of the seconds it is given
      expect(internal.burnin_cpu_result).toMatchObject({
        timeout_s: 7,
        metrics: [{ stressor: "cpu", bogo_ops: 2800 }],
      });
      expect(internal.burnin_memory_result).toMatchObject({
        timeout_s: 2,
        metrics: [{ stressor: "vm", bogo_ops: 18000 }],
      });
      expect(internal.burnin_disk_result).toMatchObject({
        loops: 1,
        runtime_s: 3,
        devices: [{ name: node.disk, total_errors: 0 }],
      });
      const history = (
        await api(`${ctx.url}/v1/nodes/burnin/history`, {
          headers: { "X-OpenStack-Ironic-API-Version": "1.78" },
        })
      ).body as { history: { event: string }[] };
      const events = history.history.map((h) => h.event).filter((e) => e.startsWith("burnin_"));
      expect(events).toEqual([
        "burnin_cpu passed: cpu 2800 bogo ops in 7 s (400/s)",
        "burnin_memory passed: vm 18000 bogo ops in 2 s (9000/s)",
        `burnin_disk passed: ${node.disk} read 67.11 MB/s, write 67.11 MB/s, 0 errors`,
      ]);
    } finally {
      await ctx.stop();
    }
  });

  it("a burn-in that finds errors fails cleaning with a clear last_error", async () => {
    const ctx = await startConductor();
    try {
      const dying = await enroll(ctx, "dying", { burninFailing: ["disk"] });
      await provisionThrough(ctx.url, "dying", [
        ["manage", "manageable"],
        [
          {
            target: "clean",
            clean_steps: [{ interface: "deploy", step: "burnin_disk", args: { loops: 1, runtime: 1 } }],
          },
          "clean wait",
        ],
      ]);
      dying.boot();
      const failed = await waitForState(ctx.url, "dying", "clean failed");
      expect(String(failed.last_error)).toContain(
        `burnin_disk: fio found errors on ${dying.disk} (error 5, 12 I/O or verify errors)`,
      );
    } finally {
      await ctx.stop();
    }
  });
});
