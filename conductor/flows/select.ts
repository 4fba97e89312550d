import type { ProvisionState } from "../../shared/states.ts";
import type { NodeInterfaces } from "../drivers/hardware-type.ts";
import { agentInspect } from "./agent-inspect.ts";
import { clean } from "./clean.ts";
import { deploy } from "./deploy.ts";
import { fakeInspect, fakeRescue } from "./fake.ts";
import { DONE, type Flow } from "./flow.ts";
import { isOutOfBand, outOfBandInspect } from "./out-of-band-inspect.ts";
import { service } from "./service.ts";
import { teardown } from "./teardown.ts";
import { verify } from "./verify.ts";

const instant: Flow = { start: () => Promise.resolve(DONE) };

const unsupported = (what: string): Flow => ({
  start: () => Promise.reject(new Error(`${what} is not supported by this hardware type`)),
});

/** The work behind a node's transient state, chosen by its interfaces; null for states that need none. */
export function flowFor(state: ProvisionState, interfaces: NodeInterfaces): Flow | null {
  const inBand = interfaces.deploy.inBand;
  switch (state) {
    case "verifying":
      return verify;
    case "inspecting":
      if (interfaces.inspect.inBand) return agentInspect;
      return isOutOfBand(interfaces.inspect) ? outOfBandInspect(interfaces.inspect) : fakeInspect;
    case "cleaning":
      return clean;
    case "deploying":
      return deploy;
    case "deleting":
      return teardown;
    case "adopting":
      return instant;
    case "rescuing":
    case "unrescuing":
      return inBand ? unsupported("rescue") : fakeRescue;
    case "servicing":
      return service;
    case "enroll":
    case "manageable":
    case "inspect wait":
    case "inspect failed":
    case "clean wait":
    case "clean failed":
    case "clean hold":
    case "available":
    case "wait call-back":
    case "deploy failed":
    case "deploy hold":
    case "active":
    case "error":
    case "rescue wait":
    case "rescue failed":
    case "rescue":
    case "unrescue failed":
    case "adopt failed":
    case "service wait":
    case "service failed":
    case "service hold":
      return null;
  }
}
