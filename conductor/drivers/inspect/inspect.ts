import type { InspectInterface } from "../interfaces.ts";

/** In-band inspection: the agent reports the inventory. */
export const agentInspect: InspectInterface = { name: "agent", inBand: true };

/** fake-hardware: inspection finishes at once (after the configured fake delay). */
export const fakeInspect: InspectInterface = { name: "fake", inBand: false };
