import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { agentDeploy } from "../../conductor/drivers/deploy/agent.ts";
import { agentRaid } from "../../conductor/drivers/raid/agent.ts";
import { ConductorError } from "../../conductor/errors.ts";
import { declaredSteps, validateRequested } from "../../conductor/tasks/step-plan.ts";

const interfaces = {
  deploy: agentDeploy,
  inspect: { name: "agent", inBand: true },
  raid: agentRaid,
} as const;

/** Step requests as an attacker writes them: near-misses of real steps, wrong types, deep junk. */
const hostileStep = fc.oneof(
  fc.anything(),
  fc.record(
    {
      interface: fc.oneof(fc.constantFrom("deploy", "raid", "boot", "__proto__", ""), fc.anything()),
      step: fc.oneof(
        fc.constantFrom("erase_devices", "create_configuration", "hold", "constructor"),
        fc.string(),
      ),
      args: fc.oneof(fc.dictionary(fc.string(), fc.anything()), fc.anything()),
      priority: fc.oneof(fc.integer(), fc.anything()),
    },
    { requiredKeys: [] },
  ),
);

describe.each(["clean", "service"] as const)("requested %s steps from the API", (kind) => {
  const steps = declaredSteps(interfaces, kind);
  it("are either accepted as known steps or refused with a 400, never anything else", () => {
    expect(steps.length).toBeGreaterThan(0);
    let tried = 0;
    let accepted = 0;
    fc.assert(
      fc.property(fc.array(hostileStep, { maxLength: 6 }), fc.boolean(), (requested, disableRamdisk) => {
        tried++;
        try {
          const plan = validateRequested(
            requested,
            steps,
            kind === "clean" ? { kind, disableRamdisk } : { kind },
          );
          accepted++;
          for (const step of plan) {
            const known =
              step.step === "hold" ||
              steps.some((s) => s.descriptor.interface === step.interface && s.descriptor.step === step.step);
            expect(known).toBe(true);
          }
        } catch (error) {
          expect(error).toBeInstanceOf(ConductorError);
          expect((error as ConductorError).status).toBe(400);
        }
      }),
      { numRuns: 2000 },
    );
    console.log(`requested ${kind} step shapes tried: ${tried}, accepted: ${accepted}`);
    expect(tried).toBe(2000);
  });
});
