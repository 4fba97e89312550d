import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COMMANDS, handlerLocation, loadHandler, offeredSteps } from "../../agent/commands/registry.ts";
import { AGENT_STEPS, type AgentStep } from "../../shared/agent-steps.ts";
import { api, provisionThrough, released, startConductor, waitForState } from "../helpers/conductor.ts";

/**
 * What one agent step needs, and nothing more: its catalogue entry (shared/agent-steps.ts) and its command's
 * handler file (agent/commands/<command>.ts, by naming convention). Everything else (the protocol's command
 * list, the agent's get_*_steps answer, the conductor's step descriptors, GET …/steps) derives from those two.
 */
const COMMANDS_DIR = join(import.meta.dirname, "..", "..", "agent", "commands");
const key = (s: { interface: string; step: string }) => `${s.interface}.${s.step}`;
const serving = [...new Set(AGENT_STEPS.map((s) => s.command))];

describe("an agent step's two files", () => {
  it.each(serving)("%s: its handler file exists and exports the handler by the convention", async (name) => {
    const { module, exportName } = handlerLocation(name);
    const file = join(COMMANDS_DIR, `${module}.ts`);
    expect(existsSync(file)).toBe(true);
    expect(readFileSync(file, "utf8")).toMatch(
      new RegExp(`export const ${exportName}: CommandHandler<"${name}">`),
    );
    expect(typeof (await loadHandler(name))).toBe("function");
  });

  it("names no central list of handlers: the registry imports no handler file", () => {
    const registry = readFileSync(join(COMMANDS_DIR, "registry.ts"), "utf8");
    const imported = [...registry.matchAll(/from "\.\/([^"]+)\.ts"/g)].map((m) => m[1]);
    expect(imported).toEqual(["command"]);
  });

  it.each(["clean", "deploy"] as const)("the agent offers every catalogue %s step", async (kind) => {
    const offered = (await offeredSteps(kind)).map(key);
    expect(offered).toEqual(AGENT_STEPS.filter((s) => s.kind === kind).map(key));
  });

  it("a catalogue command without a handler file answers NOT_SUPPORTED and offers no step", async () => {
    // set_boot is declared for the protocol but has no handler file in this agent
    expect(await loadHandler("set_boot")).toBeUndefined();
    await expect(COMMANDS.set_boot!({ device: "disk" }, {} as never)).rejects.toMatchObject({
      code: "NOT_SUPPORTED",
    });
  });
});

describe("GET …/steps shows every catalogue step a node asks for", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  let count = 0;
  beforeAll(async () => {
    ctx = await startConductor();
  });
  afterAll(async () => ctx?.stop());

  /** A fake-hardware node with the agent's deploy and RAID interfaces, in `manageable`. */
  async function manageableNode(fields: Record<string, unknown> = {}): Promise<string> {
    const name = `steps-${count++}`;
    const made = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      body: {
        name,
        driver: "fake-hardware",
        deploy_interface: "direct",
        raid_interface: "agent",
        ...fields,
      },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const raid = { logical_disks: [{ size_gb: 10, raid_level: "1", controller: "software" }] };
    const set = await api(`${ctx.url}/v1/nodes/${name}/states/raid`, { method: "PUT", body: raid });
    expect(set.status, JSON.stringify(set.body)).toBe(204);
    await provisionThrough(ctx.url, name, [["manage", "manageable"]]);
    await released(ctx.url, name); // the test's clean or provide comes next
    return name;
  }

  const asked = (s: AgentStep) => ({ interface: s.interface, step: s.step, args: s.example });

  it("clean steps: a manual clean of each one plans it", async () => {
    for (const step of AGENT_STEPS.filter((s) => s.kind === "clean")) {
      const node = await manageableNode();
      const accepted = await api(`${ctx.url}/v1/nodes/${node}/states/provision`, {
        method: "PUT",
        body: { target: "clean", clean_steps: [asked(step)] },
      });
      expect(accepted.status, `${key(step)}: ${JSON.stringify(accepted.body)}`).toBe(202);
      await waitForState(ctx.url, node, "clean wait"); // no agent boots: the plan waits for one
      const shown = await api(`${ctx.url}/v1/nodes/${node}/steps?kind=clean`);
      expect((shown.body as { steps: unknown[] }).steps).toMatchObject([
        { interface: step.interface, step: step.step, requires_ramdisk: true },
      ]);
    }
  });

  it("deploy steps: every one is in the deploy plan (priority-0 ones when asked for)", async () => {
    const node = await manageableNode({ automated_clean: false });
    await provisionThrough(ctx.url, node, [["provide", "available"]]);
    await released(ctx.url, node);
    const patched = await api(`${ctx.url}/v1/nodes/${node}`, {
      method: "PATCH",
      body: [{ op: "add", path: "/instance_info/image_source", value: "http://127.0.0.1:9/none.raw" }],
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const optIn = AGENT_STEPS.filter((s) => s.kind === "deploy" && s.priority === 0);
    const accepted = await api(`${ctx.url}/v1/nodes/${node}/states/provision`, {
      method: "PUT",
      body: { target: "active", deploy_steps: optIn.map((s) => ({ ...asked(s), priority: 95 })) },
    });
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(202);
    await waitForState(ctx.url, node, "wait call-back");
    const shown = (await api(`${ctx.url}/v1/nodes/${node}/steps?kind=deploy`)).body as {
      steps: { interface: string; step: string }[];
    };
    const planned = new Set(shown.steps.map(key));
    const missing = AGENT_STEPS.filter((s) => s.kind === "deploy" && !planned.has(key(s))).map(key);
    expect(missing).toEqual([]);
  });
});
