import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { COMMANDS, implementedCommands, offeredSteps } from "../../agent/commands/registry.ts";
import { agentDeploy } from "../../conductor/drivers/deploy/agent.ts";
import { agentRaid } from "../../conductor/drivers/raid/agent.ts";
import { fakeRaid } from "../../conductor/drivers/raid/fake.ts";
import { mergeAgentSteps, parseReportedSteps } from "../../conductor/tasks/step-plan.ts";
import {
  AGENT_COMMANDS,
  AGENT_STEPS,
  COMMAND_NAMES,
  argsinfoOf,
  type AgentCommandDeclaration,
} from "../../shared/agent-steps.ts";
import { COMMAND_ARGS, READ_ONLY_COMMANDS, parseCommandArgs } from "../../shared/protocol.ts";
import { StepDescriptorSchema } from "../../shared/steps.ts";

const inBand = [...agentDeploy.steps, ...agentRaid.steps].filter((s) => s.inBand);
const key = (s: { interface: string; step: string }) => `${s.interface}.${s.step}`;

describe("the agent catalogue", () => {
  it.each(COMMAND_NAMES)("%s: its argument schema parses its documented example", (name) => {
    const command: AgentCommandDeclaration = AGENT_COMMANDS[name];
    expect(command.args.safeParse(command.example).success).toBe(true);
  });

  it.each(AGENT_STEPS.map((s) => [key(s), s] as const))(
    "%s: its step schema parses its example",
    (_, step) => {
      expect(step.args.safeParse(step.example).success).toBe(true);
      expect(StepDescriptorSchema.safeParse({ ...step, argsinfo: argsinfoOf(step.args) }).success).toBe(true);
    },
  );

  it("names every step once per kind (a step may serve cleaning and servicing, as Ironic's decorators)", () => {
    const keys = AGENT_STEPS.map((s) => `${s.kind}:${key(s)}`);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it("is what the protocol's command list, argument schemas and read-only set are", () => {
    expect(Object.keys(COMMAND_ARGS)).toEqual(COMMAND_NAMES);
    for (const name of COMMAND_NAMES) {
      expect(COMMAND_ARGS[name]).toBe(AGENT_COMMANDS[name].args);
      expect(READ_ONLY_COMMANDS.has(name)).toBe(AGENT_COMMANDS[name].readOnly);
    }
  });

  it("has a handler in the agent for every command that serves a step", async () => {
    const serving = new Set(AGENT_STEPS.map((s) => s.command));
    const implemented = await implementedCommands();
    expect([...serving].filter((name) => !implemented.has(name))).toEqual([]);
  });

  it.each(["clean", "deploy"] as const)(
    "the agent's get_%s_steps answer equals the conductor's in-band descriptors",
    async (kind) => {
      const handler = COMMANDS[kind === "clean" ? "get_clean_steps" : "get_deploy_steps"]!;
      const answer = (await handler({}, {} as never)) as Record<string, unknown>;
      const conductor = inBand.filter((s) => s.kind === kind).map((s) => s.descriptor);
      const agent = answer[`${kind}_steps`] as unknown[];
      expect(new Set(agent.map((s) => JSON.stringify(s)))).toEqual(
        new Set(conductor.map((s) => JSON.stringify(s))),
      );
      expect(agent).toEqual(await offeredSteps(kind));
    },
  );

  it.each(["clean", "deploy"] as const)(
    "merging the agent's %s steps changes no descriptor the conductor declared",
    async (kind) => {
      const declared = [...agentDeploy.steps, ...agentRaid.steps].filter((s) => s.kind === kind);
      const merged = mergeAgentSteps(declared, parseReportedSteps(await offeredSteps(kind), kind));
      expect(merged.map((s) => s.descriptor)).toEqual(declared.map((s) => s.descriptor));
    },
  );

  it("fake RAID declares the agent's RAID steps, run by the conductor", () => {
    const strip = (s: (typeof fakeRaid.steps)[number]) => ({ ...s.descriptor, requires_ramdisk: false });
    expect(fakeRaid.steps.map((s) => s.descriptor)).toEqual(agentRaid.steps.map(strip));
    expect(fakeRaid.steps.every((s) => !s.inBand)).toBe(true);
  });

  it("install_bootloader is a deploy step at 60, Ironic's prepare_instance_boot slot", () => {
    const step = inBand.find((s) => key(s.descriptor) === "deploy.install_bootloader");
    expect(step?.descriptor).toMatchObject({ priority: 60, requires_ramdisk: true });
    expect(Object.keys(step?.descriptor.argsinfo ?? {})).toEqual(["boot_mode", "force"]);
  });

  it("refuses arguments no schema allows with a message naming the command, for any command", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...COMMAND_NAMES),
        fc.oneof(fc.string(), fc.integer(), fc.array(fc.anything())),
        fc.string({ minLength: 1 }).filter((k) => k !== "__proto__"),
        (name, junk, stray) => {
          const unknownKey = parseCommandArgs(name, { [`zz_${stray}`]: junk });
          expect(unknownKey.ok).toBe(false);
          if (!unknownKey.ok) expect(unknownKey.message.startsWith(`${name}:`)).toBe(true);
          if (typeof junk !== "object") expect(parseCommandArgs(name, junk).ok).toBe(false);
        },
      ),
    );
  });
});
