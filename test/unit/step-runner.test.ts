import { describe, expect, it } from "vitest";
import { z } from "zod";
import { agentCommand } from "../../conductor/drivers/agent-command.ts";
import { NoArgs, defineStep, type Step } from "../../conductor/drivers/step.ts";
import { IN_FLIGHT_KEY } from "../../conductor/drivers/in-flight-command.ts";
import { setTargetRaidConfig } from "../../conductor/operations/raid.ts";
import { recover } from "../../conductor/operations/recovery.ts";
import type { StepInterface, StepKind } from "../../shared/steps.ts";
import { stepHarness } from "../helpers/step-harness.ts";
import { waitFor } from "../helpers/wait.ts";

/** A controllable step: records its run, may block until released, may fail. */
function testStep(
  log: string[],
  options: {
    name: string;
    iface?: StepInterface;
    priority?: number;
    kind?: StepKind;
    abortable?: boolean;
    fail?: string;
    gate?: Promise<void>;
    timeoutMs?: number;
  },
): Step {
  return defineStep({
    kind: options.kind ?? "clean",
    interface: options.iface ?? "deploy",
    step: options.name,
    priority: options.priority ?? 0,
    abortable: options.abortable,
    timeoutMs: options.timeoutMs,
    args: NoArgs,
    async run(task) {
      log.push(`start ${options.name}`);
      if (options.gate) {
        // the step honours cancellation, as every long step does
        await Promise.race([
          options.gate,
          new Promise((_, reject) =>
            task.signal.addEventListener("abort", () => reject(task.signal.reason as Error), { once: true }),
          ),
        ]);
      }
      if (options.fail) throw new Error(options.fail);
      log.push(options.name);
    },
  });
}

function gate(): { promise: Promise<void>; open(): void } {
  let open = (): void => undefined;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

describe("the step runner", () => {
  it("runs automated clean steps by priority, ties by interface order, and skips priority 0", async () => {
    const log: string[] = [];
    const h = stepHarness({
      steps: [
        testStep(log, { name: "deploy_50", priority: 50 }),
        testStep(log, { name: "raid_50", iface: "raid", priority: 50 }),
        testStep(log, { name: "management_50", iface: "management", priority: 50 }),
        testStep(log, { name: "deploy_90", priority: 90 }),
        testStep(log, { name: "manual_only", priority: 0 }),
      ],
    });
    const node = await h.createNode();
    await h.provisioner.provision(node, { target: "provide" });
    await h.provisioner.settle();
    expect(log.filter((l) => !l.startsWith("start"))).toEqual([
      "deploy_90",
      "management_50",
      "deploy_50",
      "raid_50",
    ]);
    const done = await h.node(node.uuid);
    expect(done.provision_state).toBe("available");
    expect(done.clean_step).toEqual({});
    expect(done.driver_internal_info.clean_steps).toBeUndefined();
  });

  it("runs a priority-0 step only when asked for, in a manual clean that ends in manageable", async () => {
    const log: string[] = [];
    const h = stepHarness({
      steps: [testStep(log, { name: "automatic", priority: 10 }), testStep(log, { name: "manual_only" })],
    });
    const node = await h.createNode();
    await h.provisioner.provision(node, {
      target: "clean",
      clean_steps: [{ interface: "deploy", step: "manual_only" }],
    });
    await h.provisioner.settle();
    expect(log).toEqual(["start manual_only", "manual_only"]);
    const done = await h.node(node.uuid);
    expect(done.provision_state).toBe("manageable");
    expect(done.target_provision_state).toBeNull();
  });

  it("records the running step in clean_step and the plan in driver_internal_info", async () => {
    const log: string[] = [];
    const blocker = gate();
    const h = stepHarness({ steps: [testStep(log, { name: "slow", gate: blocker.promise })] });
    const node = await h.createNode();
    await h.provisioner.provision(node, {
      target: "clean",
      clean_steps: [{ interface: "deploy", step: "slow" }],
    });
    await waitFor(async () => log.includes("start slow"));
    const running = await h.node(node.uuid);
    expect(running.provision_state).toBe("cleaning");
    expect(running.clean_step).toMatchObject({ interface: "deploy", step: "slow", priority: 0 });
    expect(running.driver_internal_info.clean_step_index).toBe(0);
    blocker.open();
    await h.provisioner.settle();
    expect((await h.node(node.uuid)).clean_step).toEqual({});
  });

  it("holds at a hold step and continues after unhold with the next step", async () => {
    const log: string[] = [];
    const h = stepHarness({ steps: [testStep(log, { name: "first" }), testStep(log, { name: "second" })] });
    const node = await h.createNode();
    await h.provisioner.provision(node, {
      target: "clean",
      clean_steps: [
        { interface: "deploy", step: "first" },
        { interface: "deploy", step: "hold" },
        { interface: "deploy", step: "second" },
      ],
    });
    await h.provisioner.settle();
    const held = await h.node(node.uuid);
    expect(held.provision_state).toBe("clean hold");
    expect(held.target_provision_state).toBe("manageable");
    expect(held.clean_step).toMatchObject({ step: "hold" });
    expect(held.reservation).toBeNull();
    expect(log.filter((l) => !l.startsWith("start"))).toEqual(["first"]);
    await h.provisioner.provision(held, { target: "unhold" });
    await h.provisioner.settle();
    expect(log.filter((l) => !l.startsWith("start"))).toEqual(["first", "second"]);
    expect((await h.node(node.uuid)).provision_state).toBe("manageable");
  });

  it("resumes after a conductor restart from the step after the hold, without running earlier steps again", async () => {
    const log: string[] = [];
    const h = stepHarness({ steps: [testStep(log, { name: "first" }), testStep(log, { name: "second" })] });
    const node = await h.createNode();
    await h.provisioner.provision(node, {
      target: "clean",
      clean_steps: [
        { interface: "deploy", step: "first" },
        { interface: "deploy", step: "hold" },
        { interface: "deploy", step: "second" },
      ],
    });
    await h.provisioner.settle();
    const restarted = h.restart();
    expect(await recover(restarted)).toEqual([]);
    await restarted.provision(await h.node(node.uuid), { target: "unhold" });
    await restarted.settle();
    expect(log.filter((l) => !l.startsWith("start"))).toEqual(["first", "second"]);
    expect((await h.node(node.uuid)).provision_state).toBe("manageable");
  });

  it("fails a restart in the middle of a step cleanly, with last_error", async () => {
    const log: string[] = [];
    const h = stepHarness({ steps: [testStep(log, { name: "slow", gate: new Promise(() => undefined) })] });
    const node = await h.createNode();
    await h.provisioner.provision(node, {
      target: "clean",
      clean_steps: [{ interface: "deploy", step: "slow" }],
    });
    await waitFor(async () => log.includes("start slow"));
    const restarted = h.restart();
    expect(await recover(restarted)).toEqual([node.uuid]);
    const failed = await h.node(node.uuid);
    expect(failed.provision_state).toBe("clean failed");
    expect(failed.last_error).toContain("conductor restarted");
    expect(failed.clean_step).toEqual({});
  });

  /** A harness whose one automated clean step asks the agent for `sync`, then waits at `after` if given. */
  async function agentStepInFlight(after?: Promise<void>) {
    const log: string[] = [];
    const step: Step = {
      ...defineStep({
        kind: "clean",
        interface: "deploy",
        step: "agent_work",
        priority: 50,
        args: NoArgs,
        async run(task) {
          log.push(`answer ${JSON.stringify(await agentCommand(task, { name: "sync", args: {} }))}`);
          await after;
        },
      }),
      inBand: true,
    };
    step.descriptor.requires_ramdisk = true;
    const h = stepHarness({ steps: [step], inBand: true });
    h.agents.reported = { clean_steps: [{ interface: "deploy", step: "agent_work", priority: 50 }] };
    const node = await h.createNode();
    await h.provisioner.provision(node, { target: "provide" });
    await h.provisioner.settle();
    h.agents.connected.add(node.uuid);
    return { h, node, log };
  }

  /** An in-band automated clean step on a fast-track conductor whose agent double is connected. */
  async function fastTrackNode(powerState: "power on" | "power off") {
    const log: string[] = [];
    const step = testStep(log, { name: "agent_work", priority: 50 });
    step.descriptor.requires_ramdisk = true;
    const h = stepHarness({ steps: [step], inBand: true, fastTrack: true });
    h.agents.reported = { clean_steps: [{ interface: "deploy", step: "agent_work", priority: 50 }] };
    const created = await h.createNode();
    const node = await h.store.updateNode(created.uuid, { power_state: powerState });
    h.agents.connected.add(node.uuid);
    await h.provisioner.provision(node, { target: "provide" });
    await h.provisioner.settle();
    return { h, node, log };
  }

  it("fast track: a powered-on node with its agent connected runs its steps with no boot", async () => {
    const { h, node, log } = await fastTrackNode("power on");
    expect(log).toEqual(["start agent_work", "agent_work"]);
    expect(await h.node(node.uuid)).toMatchObject({ provision_state: "available", last_error: null });
  });

  it("fast track: a powered-off node boots its ramdisk, whatever connection its last agent left", async () => {
    const { h, node, log } = await fastTrackNode("power off");
    expect(log).toEqual([]);
    expect(h.agents.calls).toEqual([]);
    expect(await h.node(node.uuid)).toMatchObject({ provision_state: "clean wait", power_state: "power on" });
  });

  it("a restart while the agent runs a step's command waits for it and asks for the same command id again", async () => {
    const { h, node, log } = await agentStepInFlight();
    h.agents.stalled.add("sync"); // the first conductor dies before the answer comes
    await h.provisioner.agentConnected(node.uuid);
    await waitFor(async () => h.agents.calls.some((c) => c.name === "sync"));
    const sent = h.agents.calls.find((c) => c.name === "sync")!.id;
    expect(sent).toEqual(expect.any(String));
    const during = await h.node(node.uuid);
    expect(during.provision_state).toBe("cleaning");
    expect(during.driver_internal_info[IN_FLIGHT_KEY]).toEqual({
      step: "clean:0",
      ids: { sync: sent },
      settled: [],
    });

    h.agents.stalled.delete("sync");
    const restarted = h.restart();
    expect(await recover(restarted)).toEqual([]); // not failed: waiting for the agent, which is connected
    await restarted.settle();
    const syncs = h.agents.calls.filter((c) => c.name === "sync");
    expect(syncs.map((c) => c.id)).toEqual([sent, sent]);
    expect(log).toEqual(['answer {"answered":"sync"}']);
    const done = await h.node(node.uuid);
    expect(done.provision_state).toBe("available");
    expect(done.last_error).toBeNull();
    expect(done.driver_internal_info[IN_FLIGHT_KEY]).toBeUndefined();
  });

  it("a restart after the agent answered, while the step still works, fails the node as before", async () => {
    const { h, node, log } = await agentStepInFlight(new Promise(() => undefined));
    await h.provisioner.agentConnected(node.uuid);
    await waitFor(async () => log.length === 1);
    const during = await h.node(node.uuid);
    expect(during.driver_internal_info[IN_FLIGHT_KEY]).toMatchObject({ settled: ["sync"] });
    const restarted = h.restart();
    expect(await recover(restarted)).toEqual([node.uuid]);
    const failed = await h.node(node.uuid);
    expect(failed.provision_state).toBe("clean failed");
    expect(failed.last_error).toContain("conductor restarted");
    expect(failed.driver_internal_info[IN_FLIGHT_KEY]).toBeUndefined();
  });

  it("a new plan never re-attaches to a command a failed one left recorded", async () => {
    const { h, node } = await agentStepInFlight();
    h.agents.stalled.add("sync");
    await h.provisioner.agentConnected(node.uuid);
    await waitFor(async () => h.agents.calls.some((c) => c.name === "sync"));
    const first = h.agents.calls.find((c) => c.name === "sync")!.id;
    h.agents.connected.delete(node.uuid); // the agent is gone too: the node waits, then the operator aborts
    const restarted = h.restart();
    expect(await recover(restarted)).toEqual([]);
    expect((await h.node(node.uuid)).provision_state).toBe("clean wait");
    await restarted.provision(await h.node(node.uuid), { target: "abort" });
    await restarted.settle();
    expect((await h.node(node.uuid)).provision_state).toBe("clean failed");
    expect((await h.node(node.uuid)).driver_internal_info[IN_FLIGHT_KEY]).toBeUndefined();

    h.agents.stalled.delete("sync");
    await restarted.provision(await h.node(node.uuid), { target: "manage" });
    await restarted.settle();
    await restarted.provision(await h.node(node.uuid), { target: "provide" });
    await restarted.settle();
    h.agents.connected.add(node.uuid);
    await restarted.agentConnected(node.uuid);
    await restarted.settle();
    const ids = h.agents.calls.filter((c) => c.name === "sync").map((c) => c.id);
    expect(ids).toHaveLength(2);
    expect(ids[1]).not.toBe(first);
    expect((await h.node(node.uuid)).provision_state).toBe("available");
  });

  it("cancels an abortable step on abort", async () => {
    const log: string[] = [];
    const h = stepHarness({
      steps: [
        testStep(log, { name: "long_erase", abortable: true, gate: new Promise(() => undefined) }),
        testStep(log, { name: "after" }),
      ],
    });
    const node = await h.createNode();
    await h.provisioner.provision(node, {
      target: "clean",
      clean_steps: [
        { interface: "deploy", step: "long_erase" },
        { interface: "deploy", step: "after" },
      ],
    });
    await waitFor(async () => log.includes("start long_erase"));
    await h.provisioner.provision(await h.node(node.uuid), { target: "abort" });
    await h.provisioner.settle();
    const aborted = await h.node(node.uuid);
    expect(aborted.provision_state).toBe("clean failed");
    expect(aborted.last_error).toBe(
      'By request, the clean operation was aborted during step "deploy.long_erase"',
    );
    expect(log).not.toContain("after");
    expect(aborted.reservation).toBeNull();
  });

  it("lets a non-abortable step finish on abort and stops after it", async () => {
    const log: string[] = [];
    const blocker = gate();
    const h = stepHarness({
      steps: [testStep(log, { name: "raid_build", gate: blocker.promise }), testStep(log, { name: "after" })],
    });
    const node = await h.createNode();
    await h.provisioner.provision(node, {
      target: "clean",
      clean_steps: [
        { interface: "deploy", step: "raid_build" },
        { interface: "deploy", step: "after" },
      ],
    });
    await waitFor(async () => log.includes("start raid_build"));
    await h.provisioner.provision(await h.node(node.uuid), { target: "abort" });
    expect((await h.node(node.uuid)).clean_step).toMatchObject({ step: "raid_build", abort_after: true });
    blocker.open();
    await h.provisioner.settle();
    const aborted = await h.node(node.uuid);
    expect(log).toContain("raid_build");
    expect(log).not.toContain("start after");
    expect(aborted.provision_state).toBe("clean failed");
    expect(aborted.last_error).toContain('aborted after the completion of step "deploy.raid_build"');
  });

  it("fails the node into clean failed with last_error naming the step", async () => {
    const log: string[] = [];
    const h = stepHarness({ steps: [testStep(log, { name: "wipe", priority: 10, fail: "disk on fire" })] });
    const node = await h.createNode();
    await h.provisioner.provision(node, { target: "provide" });
    await h.provisioner.settle();
    const failed = await h.node(node.uuid);
    expect(failed.provision_state).toBe("clean failed");
    expect(failed.last_error).toBe(`Node ${node.uuid} failed clean step deploy.wipe: disk on fire`);
    expect(failed.clean_step).toEqual({});
    expect(failed.driver_internal_info.clean_steps).toBeUndefined();
  });

  it("fails a deploy step into deploy failed", async () => {
    const log: string[] = [];
    const h = stepHarness({
      steps: [testStep(log, { name: "deploy", kind: "deploy", priority: 100, fail: "no image" })],
    });
    const node = await h.createNode("available");
    await h.provisioner.provision(node, { target: "active" });
    await h.provisioner.settle();
    const failed = await h.node(node.uuid);
    expect(failed.provision_state).toBe("deploy failed");
    expect(failed.last_error).toBe(`Node ${node.uuid} failed deploy step deploy.deploy: no image`);
    expect(failed.deploy_step).toEqual({});
  });

  it("runs deploy_steps merged with the automated ones by priority", async () => {
    const log: string[] = [];
    const h = stepHarness({
      steps: [
        testStep(log, { name: "deploy", kind: "deploy", priority: 100 }),
        testStep(log, { name: "extra", kind: "deploy", priority: 0 }),
      ],
    });
    const node = await h.createNode("available");
    await h.provisioner.provision(node, {
      target: "active",
      deploy_steps: [{ interface: "deploy", step: "extra", priority: 150 }],
    });
    await h.provisioner.settle();
    expect(log.filter((l) => !l.startsWith("start"))).toEqual(["extra", "deploy"]);
    expect((await h.node(node.uuid)).provision_state).toBe("active");
  });

  it("fails a step that outlives its timeout", async () => {
    const log: string[] = [];
    const h = stepHarness({
      steps: [testStep(log, { name: "stuck", timeoutMs: 30, gate: new Promise(() => undefined) })],
    });
    const node = await h.createNode();
    await h.provisioner.provision(node, {
      target: "clean",
      clean_steps: [{ interface: "deploy", step: "stuck" }],
    });
    await h.provisioner.settle();
    const failed = await h.node(node.uuid);
    expect(failed.provision_state).toBe("clean failed");
    expect(failed.last_error).toBe(
      `Node ${node.uuid} failed clean step deploy.stuck: step timed out after 0.03 s`,
    );
  });

  it("records target_raid_config as raid_config with the fake raid interface", async () => {
    const h = stepHarness({ steps: [] });
    const node = await h.createNode();
    const config = { logical_disks: [{ size_gb: 10, raid_level: "1" as const, is_root_volume: true }] };
    await setTargetRaidConfig(h.provisioner, node, config);
    await h.provisioner.provision(await h.node(node.uuid), {
      target: "clean",
      clean_steps: [{ interface: "raid", step: "create_configuration" }],
    });
    await h.provisioner.settle();
    const built = await h.node(node.uuid);
    expect(built.raid_config).toEqual(config);
    expect(built.provision_state).toBe("manageable");
  });

  it("boots the ramdisk for in-band steps and plans with the agent's own list once it calls back", async () => {
    const log: string[] = [];
    const inBand = (name: string, priority: number): Step => ({
      ...testStep(log, { name, priority }),
      inBand: true,
      descriptor: { ...testStep(log, { name, priority }).descriptor, requires_ramdisk: true },
    });
    const h = stepHarness({
      steps: [inBand("metadata", 99), inBand("unsupported", 50), inBand("raised", 0)],
      inBand: true,
    });
    h.agents.reported = {
      clean_steps: [
        { interface: "deploy", step: "metadata", priority: 99, abortable: true },
        { interface: "deploy", step: "raised", priority: 10 },
      ],
    };
    const node = await h.createNode();
    await h.provisioner.provision(node, { target: "provide" });
    await h.provisioner.settle();
    expect((await h.node(node.uuid)).provision_state).toBe("clean wait");
    expect(log).toEqual([]);
    h.agents.connected.add(node.uuid);
    await h.provisioner.agentConnected(node.uuid);
    await h.provisioner.settle();
    expect(h.agents.calls.map((c) => c.name)).toContain("get_clean_steps");
    expect(log.filter((l) => !l.startsWith("start"))).toEqual(["metadata", "raised"]);
    const done = await h.node(node.uuid);
    expect(done.provision_state).toBe("available");
    expect(done.power_state).toBe("power off");
  });
});

describe("requested steps are validated before anything runs", () => {
  const steps = (): Step[] => [
    defineStep({
      kind: "clean",
      interface: "deploy",
      step: "configure",
      priority: 0,
      args: z.object({
        level: z.number().int().describe("how hard"),
        label: z.string().optional().describe("a label"),
      }),
      run: async () => undefined,
    }),
  ];

  async function attempt(clean_steps: unknown[], extra: { disable_ramdisk?: boolean } = {}) {
    const h = stepHarness({ steps: steps() });
    const node = await h.createNode();
    const error = await h.provisioner
      .provision(node, { target: "clean", clean_steps: clean_steps as Record<string, unknown>[], ...extra })
      .then(
        () => null,
        (e: unknown) => e as { status?: number; message: string },
      );
    const after = await h.node(node.uuid);
    return { error, after };
  }

  it.each([
    [
      [{ interface: "deploy", step: "unknown_step" }],
      "node does not support this clean step: deploy.unknown_step",
    ],
    [[{ interface: "boot", step: "configure", args: { level: 1 } }], "step 1 is not valid"],
    [[{ interface: "deploy", step: "configure" }], "level"],
    [
      [{ interface: "deploy", step: "configure", args: { level: 1, colour: "red" } }],
      "unexpected arguments: colour",
    ],
    [[{ interface: "deploy", step: "configure", args: { level: "high" } }], "invalid arguments"],
    [[{ interface: "deploy", step: "configure", args: { level: 1 }, extra: 1 }], "unexpected keys extra"],
  ])("refuses %j with 400", async (requested, message) => {
    const { error, after } = await attempt(requested);
    expect(error?.status).toBe(400);
    expect(error?.message).toContain(message);
    expect(after.provision_state).toBe("manageable");
    expect(after.reservation).toBeNull();
  });

  it("refuses a ramdisk step when the ramdisk is disabled", async () => {
    const h = stepHarness({
      steps: [{ ...steps()[0]!, descriptor: { ...steps()[0]!.descriptor, requires_ramdisk: true } }],
    });
    const node = await h.createNode();
    await expect(
      h.provisioner.provision(node, {
        target: "clean",
        clean_steps: [{ interface: "deploy", step: "configure", args: { level: 1 } }],
        disable_ramdisk: true,
      }),
    ).rejects.toThrow("requires booting a ramdisk");
  });

  it("refuses clean without clean_steps, and clean_steps with another target", async () => {
    const h = stepHarness({ steps: steps() });
    const node = await h.createNode();
    await expect(h.provisioner.provision(node, { target: "clean" })).rejects.toThrow(
      '"clean_steps" is required',
    );
    await expect(h.provisioner.provision(node, { target: "provide", clean_steps: [] })).rejects.toThrow(
      '"clean_steps" is only valid',
    );
  });

  it("derives argsinfo from the argument schema", () => {
    expect(steps()[0]!.descriptor.argsinfo).toEqual({
      level: { description: "how hard", required: true },
      label: { description: "a label", required: false },
    });
  });
});
