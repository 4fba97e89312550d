import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startConductor, waitForState } from "../helpers/conductor.ts";
import {
  ensureAgentBuilt,
  recordingLogger,
  sampleInventory,
  startAgentProcess,
  writeSimulatedMachine,
  type AgentProcess,
} from "../helpers/agent.ts";

const run = promisify(execFile);
const BOOT_MAC = "52:54:00:90:35:d6";
const SECOND_MAC = "52:54:00:90:35:d7";

/** In-band inspection end to end: stock CLI → conductor → agent executable (simulated hardware) → properties. */
describe("inspection through the agent", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  let agent: AgentProcess | undefined;
  let executable = "";
  const dir = mkdtempSync(join(tmpdir(), "anvil-inspect-"));
  const logs = recordingLogger();
  const inventory = sampleInventory({ macs: [BOOT_MAC, SECOND_MAC] });

  const bm = async (...args: string[]): Promise<string> =>
    (
      await run("baremetal", ["--os-auth-type", "none", "--os-endpoint", ctx.url, ...args], {
        timeout: 90_000,
      })
    ).stdout;

  beforeAll(async () => {
    executable = await ensureAgentBuilt();
    ctx = await startConductor({}, { logger: logs });
  }, 300_000);
  afterAll(async () => {
    await agent?.stop();
    await ctx.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("fills in properties, ports and the inventory, and the node returns to manageable", async () => {
    await bm(
      "node",
      "create",
      "--driver",
      "fake-hardware",
      "--inspect-interface",
      "agent",
      "--name",
      "sim1",
      "--property",
      'root_device={"serial": "SIM-0001"}',
    );
    const uuid = (await bm("node", "show", "sim1", "--fields", "uuid", "-f", "value")).trim();
    await bm("port", "create", "--node", uuid, BOOT_MAC);
    await bm("node", "manage", "sim1", "--wait", "60");
    await bm("node", "inspect", "sim1");
    await waitForState(ctx.url, "sim1", "inspect wait");

    // the node "boots" the ramdisk: the agent dials the conductor and is looked up by its MACs
    const machine = await writeSimulatedMachine(dir, inventory);
    const wsUrl = ctx.url.replace("http://", "ws://") + "/v1/agent";
    agent = startAgentProcess({
      executable,
      args: [
        "service",
        "--conductor",
        wsUrl,
        "--backend",
        "simulated",
        "--inventory",
        machine,
        "--token-file",
        join(dir, "token"),
      ],
    });
    await waitForState(ctx.url, "sim1", "manageable");

    const node = JSON.parse(await bm("node", "show", "sim1", "-f", "json")) as Record<string, unknown>;
    expect(node.last_error).toBeNull();
    expect(node.properties).toMatchObject({
      cpus: 8,
      memory_mb: 16384,
      local_gb: 19,
      cpu_arch: "x86_64",
      capabilities: "boot_mode:bios",
    });
    expect(node.inspection_finished_at).not.toBeNull();
    const ports = JSON.parse(await bm("port", "list", "--node", "sim1", "--long", "-f", "json")) as Record<
      string,
      unknown
    >[];
    const byMac = Object.fromEntries(ports.map((p) => [p.Address, p["PXE boot enabled"]]));
    expect(byMac).toEqual({ [BOOT_MAC]: true, [SECOND_MAC]: false });

    const stored = await api(`${ctx.url}/v1/nodes/sim1/inventory`);
    expect(stored.status).toBe(200);
    expect((stored.body as { inventory: unknown }).inventory).toEqual(inventory);
  });

  it("keeps the agent token out of the API and the logs", async () => {
    const tokenRecord = await ctx.conductor.store.getAgentToken(
      String(((await api(`${ctx.url}/v1/nodes/sim1`)).body as { uuid: string }).uuid),
    );
    expect(tokenRecord?.digest).toMatch(/^[0-9a-f]{64}$/);
    const everything = JSON.stringify((await api(`${ctx.url}/v1/nodes/detail`)).body);
    expect(everything).not.toContain(tokenRecord?.digest);
    const token = readFileSync(join(dir, "token"), "utf8").trim();
    expect(token.length).toBeGreaterThan(20);
    expect(everything).not.toContain(token);
    const agentOutput = (await agent?.stop())?.stderr ?? "";
    agent = undefined;
    expect(logs.lines.length).toBeGreaterThan(0);
    for (const line of [...logs.lines, agentOutput]) expect(line).not.toContain(token);
  });
});
