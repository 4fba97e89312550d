import type { NodeRecord } from "../../shared/resources.ts";
import { agentClean } from "./agent-clean.ts";
import { agentDeploy } from "./agent-deploy.ts";
import { agentInspect } from "./agent-inspect.ts";
import { fakeClean, fakeDeploy, fakeInspect, fakeRescue, fakeService } from "./fake.ts";
import { DONE, type Flow } from "./flow.ts";
import type { UrlSigner } from "./image-request.ts";
import { teardown } from "./teardown.ts";
import { verify } from "./verify.ts";

const instant: Flow = { start: () => Promise.resolve(DONE) };

const unsupported = (what: string): Flow => ({
  start: () => Promise.reject(new Error(`${what} is not supported by this hardware type`)),
});

/** The work behind a node's transient state, chosen by its interfaces; null for states that need none. */
export function flowFor(
  node: Pick<NodeRecord, "provision_state" | "deploy_interface" | "inspect_interface">,
  sign: UrlSigner,
): Flow | null {
  const state = node.provision_state;
  // "fake" interfaces finish at once; any other deploy/inspect interface means the ramdisk agent
  const agent = node.deploy_interface !== "fake";
  switch (state) {
    case "verifying":
      return verify;
    case "inspecting":
      return node.inspect_interface !== "fake" ? agentInspect : fakeInspect;
    case "cleaning":
      return agent ? agentClean : fakeClean;
    case "deploying":
      return agent ? agentDeploy(sign) : fakeDeploy;
    case "deleting":
      return teardown;
    case "adopting":
      return instant;
    case "rescuing":
    case "unrescuing":
      return agent ? unsupported("rescue") : fakeRescue;
    case "servicing":
      return agent ? unsupported("servicing") : fakeService;
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
