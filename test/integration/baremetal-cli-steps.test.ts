import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, faultOf, startConductor, waitForState } from "../helpers/conductor.ts";

const run = promisify(execFile);

/** Manual cleaning, RAID and steps through the stock `baremetal` CLI (Debian's python3-ironicclient), fake-hardware. */
describe("clean steps and RAID through the stock baremetal CLI", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;

  const bm = async (...args: string[]): Promise<string> => {
    const { stdout } = await run("baremetal", ["--os-auth-type", "none", "--os-endpoint", ctx.url, ...args], {
      env: { ...process.env, OS_CLOUD: "" },
      timeout: 60_000,
    });
    return stdout;
  };
  const bmFails = async (...args: string[]): Promise<string> => {
    try {
      await bm(...args);
    } catch (error) {
      return String((error as { stderr?: string }).stderr ?? error);
    }
    throw new Error(`baremetal ${args.join(" ")} succeeded`);
  };
  const show = async (...fields: string[]): Promise<Record<string, unknown>> =>
    JSON.parse(await bm("node", "show", "s1", "--fields", ...fields, "-f", "json")) as Record<
      string,
      unknown
    >;

  const raid = { logical_disks: [{ size_gb: 10, raid_level: "1", is_root_volume: true }] };

  beforeAll(async () => {
    ctx = await startConductor({ fakeDelayMs: 20 });
    await bm("node", "create", "--driver", "fake-hardware", "--name", "s1");
    await bm("node", "manage", "s1", "--wait", "60");
  });
  afterAll(async () => {
    await ctx.stop();
  });

  it("a manual clean with clean steps returns the node to manageable", async () => {
    await bm(
      "node",
      "clean",
      "--clean-steps",
      '[{"interface": "raid", "step": "delete_configuration"}]',
      "s1",
      "--wait",
      "60",
    );
    const node = await show("provision_state", "clean_step", "last_error");
    expect(node.provision_state).toBe("manageable");
    expect(node.clean_step).toEqual({});
    expect(node.last_error).toBeNull();
  });

  it("set --target-raid-config, then raid.create_configuration records raid_config", async () => {
    await bm("node", "set", "s1", "--target-raid-config", JSON.stringify(raid));
    expect((await show("target_raid_config")).target_raid_config).toEqual(raid);
    await bm(
      "node",
      "clean",
      "--clean-steps",
      '[{"interface": "raid", "step": "create_configuration"}]',
      "s1",
      "--wait",
      "60",
    );
    const node = await show("provision_state", "clean_step", "raid_config", "target_raid_config");
    expect(node.provision_state).toBe("manageable");
    expect(node.raid_config).toEqual(raid);
    expect(node.target_raid_config).toEqual(raid);
    const states = await api(`${ctx.url}/v1/nodes/s1/states`);
    expect(states.body).toMatchObject({ raid_config: raid, target_raid_config: raid });
  });

  it("a bad RAID config gets Ironic's 400", async () => {
    const stderr = await bmFails(
      "node",
      "set",
      "s1",
      "--target-raid-config",
      '{"logical_disks": [{"size_gb": 10, "raid_level": "7"}]}',
    );
    expect(stderr).toContain("RAID config validation error");
    const direct = await api(`${ctx.url}/v1/nodes/s1/states/raid`, {
      method: "PUT",
      body: { logical_disks: [{ raid_level: "1" }] },
    });
    expect(direct.status).toBe(400);
    expect(faultOf(direct.body)).toContain("RAID config validation error: logical_disks.0.size_gb");
    const old = await api(`${ctx.url}/v1/nodes/s1/states/raid`, {
      method: "PUT",
      body: raid,
      headers: { "X-OpenStack-Ironic-API-Version": "1.11" },
    });
    expect(old.status).toBe(406);
  });

  it("an unknown clean step or interface is refused with 400 before anything runs", async () => {
    const stderr = await bmFails(
      "node",
      "clean",
      "--clean-steps",
      '[{"interface": "deploy", "step": "no_such_step"}]',
      "s1",
    );
    expect(stderr).toContain("node does not support this clean step: deploy.no_such_step");
    const badInterface = await api(`${ctx.url}/v1/nodes/s1/states/provision`, {
      method: "PUT",
      body: { target: "clean", clean_steps: [{ interface: "inspect", step: "x" }] },
    });
    expect(badInterface.status).toBe(400);
    expect((await show("provision_state")).provision_state).toBe("manageable");
  });

  it("holds at a hold step until the operator unholds", async () => {
    await bm(
      "node",
      "clean",
      "--clean-steps",
      '[{"interface": "deploy", "step": "hold"}, {"interface": "raid", "step": "delete_configuration"}]',
      "s1",
    );
    await waitForState(ctx.url, "s1", "clean hold");
    const held = await show("provision_state", "clean_step", "raid_config");
    expect(held.provision_state).toBe("clean hold");
    expect(held.clean_step).toMatchObject({ interface: "deploy", step: "hold" });
    expect(held.raid_config).toEqual(raid);
    // NOTE: Debian's client predates `baremetal node unhold`: the API directly
    const unhold = await api(`${ctx.url}/v1/nodes/s1/states/provision`, {
      method: "PUT",
      body: { target: "unhold" },
      headers: { "X-OpenStack-Ironic-API-Version": "1.85" },
    });
    expect(unhold.status).toBe(202);
    await waitForState(ctx.url, "s1", "manageable");
    const done = await show("provision_state", "raid_config");
    expect(done.provision_state).toBe("manageable");
    expect(done.raid_config).toEqual({});
  });

  it("shows the steps a node will run (Anvil extension)", async () => {
    const steps = await api(`${ctx.url}/v1/nodes/s1/steps?kind=deploy`);
    expect(steps.status).toBe(200);
    expect(steps.body).toMatchObject({
      kind: "deploy",
      steps: [{ interface: "deploy", step: "deploy", priority: 100 }],
      current_index: null,
    });
    expect((await api(`${ctx.url}/v1/nodes/s1/steps?kind=nope`)).status).toBe(400);
  });
});
