import { mkdtempSync, rmSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureAgentBuilt, type AgentProcess } from "../helpers/agent.ts";
import { api, provisionThrough, released, startConductor, waitForState } from "../helpers/conductor.ts";
import { readRange } from "../helpers/disk.ts";
import { enrollSimulatedNode } from "../helpers/simulated-node.ts";

/** Manual cleaning with the agent executable on simulated hardware (its disk is a file). */
describe("manual cleaning through the agent", () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-clean-steps-"));
  let executable = "";
  const agents: AgentProcess[] = [];

  beforeAll(async () => {
    executable = await ensureAgentBuilt();
  }, 300_000);
  afterAll(async () => {
    for (const agent of agents.splice(0)) await agent.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("runs the agent's erase_devices_metadata, records clean_step while it runs, and ends manageable", async () => {
    const ctx = await startConductor();
    try {
      const node = await enrollSimulatedNode({
        url: ctx.url,
        dir,
        name: "c1",
        mac: "52:54:00:00:02:01",
        executable,
      });
      await writeFile(node.disk, Buffer.from("OLD-PARTITION-TABLE"), { flag: "r+" });
      const seen: unknown[] = [];
      const transitions: string[] = [];
      ctx.conductor.events.subscribe((event) => {
        if (event.node !== node.uuid) return;
        if (event.type === "provision") transitions.push(String(event.provision_state));
        if (event.type === "step" && event.status === "start") {
          // NOTE: the store answers within this tick (SQLite is synchronous), so this is the node as the API
          // serves it while the step runs, not after
          void ctx.conductor.store.getNode(node.uuid).then((n) => {
            seen.push({ clean_step: n?.clean_step, provision_state: n?.provision_state });
          });
        }
      });
      await provisionThrough(ctx.url, "c1", [["manage", "manageable"]]);
      await released(ctx.url, "c1");
      const accepted = await api(`${ctx.url}/v1/nodes/c1/states/provision`, {
        method: "PUT",
        body: { target: "clean", clean_steps: [{ interface: "deploy", step: "erase_devices_metadata" }] },
      });
      expect(accepted.status).toBe(202);
      await waitForState(ctx.url, "c1", "clean wait");
      const planned = await api(`${ctx.url}/v1/nodes/c1/steps?kind=clean`);
      expect(planned.body).toMatchObject({
        steps: [{ interface: "deploy", step: "erase_devices_metadata", requires_ramdisk: true }],
      });
      agents.push(node.boot());
      const done = await waitForState(ctx.url, "c1", "manageable");
      expect(done.last_error).toBeNull();
      expect(done.clean_step).toEqual({});
      expect(done.power_state).toBe("power off");
      expect(seen).toEqual([
        {
          clean_step: expect.objectContaining({
            interface: "deploy",
            step: "erase_devices_metadata",
            abortable: true,
          }) as unknown,
          provision_state: "cleaning",
        },
      ]);
      expect(transitions).toEqual([
        "verifying",
        "manageable",
        "cleaning",
        "clean wait",
        "cleaning",
        "manageable",
      ]);
      expect((await readRange(node.disk, 0, 19)).equals(Buffer.alloc(19))).toBe(true);
      const stored = await ctx.conductor.store.getNode(node.uuid);
      expect(stored?.driver_internal_info.clean_steps).toBeUndefined();
    } finally {
      await ctx.stop();
    }
  }, 120_000); // room for waitForState's own 60 s to name the state
  it("records erase_devices' per-disk results in driver_internal_info", async () => {
    const ctx = await startConductor();
    try {
      const node = await enrollSimulatedNode({
        url: ctx.url,
        dir,
        name: "c2",
        mac: "52:54:00:00:02:02",
        executable,
      });
      await writeFile(node.disk, Buffer.alloc(4096, 0xab), { flag: "r+" });
      await provisionThrough(ctx.url, "c2", [["manage", "manageable"]]);
      await released(ctx.url, "c2");
      // the clean's 202 read: a refused clean left the node manageable and the wait timed out unnamed
      const accepted = await api(`${ctx.url}/v1/nodes/c2/states/provision`, {
        method: "PUT",
        body: { target: "clean", clean_steps: [{ interface: "deploy", step: "erase_devices" }] },
      });
      expect(accepted.status, JSON.stringify(accepted.body)).toBe(202);
      await waitForState(ctx.url, "c2", "clean wait");
      agents.push(node.boot());
      const done = await waitForState(ctx.url, "c2", "manageable");
      expect(done.last_error).toBeNull();
      const stored = await ctx.conductor.store.getNode(node.uuid);
      const result = stored?.driver_internal_info.erase_devices_result as {
        devices: { device: string; method: string | null; verified: boolean }[];
      };
      expect(result.devices.length).toBeGreaterThan(0);
      for (const disk of result.devices) expect(disk).toMatchObject({ verified: true });
      expect((await readRange(node.disk, 0, 4096)).equals(Buffer.alloc(4096))).toBe(true);
    } finally {
      await ctx.stop();
    }
  }, 120_000);
});
