import type { ProvisionState } from "../../shared/states.ts";
import { NodeLocked } from "../db/store.ts";
import { prepareInstanceBoot } from "../drivers/boot/instance-boot.ts";
import { failWork, handToAgent } from "../flows/drive.ts";
import { rewriteRamdiskBoot } from "../flows/ramdisk.ts";
import { TRANSIENT_STATES, WAIT_STATES } from "../states/machine.ts";
import type { NodeLock } from "../tasks/lock.ts";
import type { Provisioner } from "./provisioner.ts";

/**
 * What happens to work a conductor left behind: its own after a restart, a dead one's after a takeover
 * (Ironic's conductor start-up reservation clean-up and takeover). Every change runs under the node's lock.
 */

/** States whose boot files a new owner writes again after a takeover: the wait states, and active. */
function adoptable(state: ProvisionState): boolean {
  return WAIT_STATES.includes(state) || state === "active";
}

/**
 * After a restart: release the locks this conductor left and fail the work that was in flight
 * (wait and hold states stay: their agents call back, the operator unholds, or their timeout fails them).
 * Returns the nodes failed.
 */
export async function recover(provisioner: Provisioner): Promise<string[]> {
  const failed: string[] = [];
  const { store, holder } = provisioner.deps;
  for (const uuid of await store.releaseAllReservations(holder)) {
    if (await abandon(provisioner, uuid, "The conductor restarted")) failed.push(uuid);
  }
  return failed;
}

/**
 * Takeover: a dead conductor's lock on a node this one now owns is freed, and its in-flight work settled
 * by the same rules as a restart. Returns whether the node was failed.
 */
export async function takeOver(
  provisioner: Provisioner,
  dead: { uuid: string; holder: string; cause: string },
): Promise<boolean> {
  await provisioner.deps.store.releaseNode(dead.uuid, dead.holder);
  return abandon(provisioner, dead.uuid, dead.cause);
}

/**
 * Takeover of boot files a conductor now gone wrote (they lived on its disk), as Ironic's takeover does:
 * - a node waiting for its agent (Ironic keeps wait states across a takeover) gets its ramdisk boot
 *   configuration written again here, so a reboot lands on this conductor, and its wait timer restarts; the
 *   agent's call-back (here, or redirected here) resumes the flow. The agent token is kept.
 * - an `active` node gets its instance boot configuration written again (Ironic's prepare_instance).
 * Nothing is powered. Returns false when the node is locked, gone or in neither case any more.
 */
export async function adoptBoot(provisioner: Provisioner, uuid: string): Promise<boolean> {
  const node = await provisioner.deps.store.getNode(uuid);
  if (!node || !adoptable(node.provision_state)) return false;
  const lock = await provisioner.tryAcquire(node, "takeover");
  if (!lock) return false;
  const adopted = await lock.run(async (task) => {
    const state = task.node.provision_state;
    if (WAIT_STATES.includes(state)) await rewriteRamdiskBoot(task);
    else if (state === "active") await prepareInstanceBoot(task);
    else return false;
    return true;
  });
  // an agent that reconnected here before the takeover saw the node as ours: its call-back resumes now
  if (adopted && provisioner.deps.agents.isConnected(uuid)) await provisioner.agentConnected(uuid);
  return adopted;
}

/**
 * Settles an unlocked node's abandoned transient state and clears a pending power change. A clean or deploy
 * step that was waiting for the agent's answer to a command goes to its wait state: the agent keeps working
 * and keeps its result, and its call-back here runs the step again, which asks for the same command and gets
 * that result (Ironic keeps such nodes in their wait state across a takeover too); if the agent never calls
 * back, the wait's timeout fails the node. Any other transient state is failed. Wait and hold states stay
 * (their agents call back, the operator unholds, or their timeout fails them). Returns whether it failed.
 */
async function abandon(provisioner: Provisioner, uuid: string, cause: string): Promise<boolean> {
  const node = await provisioner.deps.store.getNode(uuid);
  const inFlight = node !== null && TRANSIENT_STATES.includes(node.provision_state);
  if (!node || (!inFlight && node.target_power_state === null)) return false;
  let lock: NodeLock;
  try {
    lock = await provisioner.acquire(node, "takeover");
  } catch (error) {
    if (error instanceof NodeLocked) return false; // someone else got to it first
    throw error;
  }
  let outcome = "unchanged" as "failed" | "waiting" | "unchanged";
  await lock.run(async (task) => {
    if (inFlight && (await handToAgent(task, cause))) {
      outcome = "waiting";
      return;
    }
    const message = `${cause} while the node was in "${node.provision_state}"; the operation was abandoned.`;
    await task.update({ target_power_state: null, last_error: message });
    if (!inFlight) return;
    await failWork(task, message);
    outcome = "failed";
  });
  // an agent already connected here (it reconnected before the takeover) calls back now
  if (outcome === "waiting" && provisioner.deps.agents.isConnected(uuid))
    await provisioner.agentConnected(uuid);
  return outcome === "failed";
}
