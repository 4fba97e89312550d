import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { labAccess } from "./access.ts";
import { baremetal, type Baremetal } from "./baremetal.ts";
import { writeEnrollFile } from "./enroll.ts";
import { recordEvents, type RecordedEvent } from "./events.ts";
import { probeLabNode, type LabNodeProbe } from "./probe.ts";
import type { LabNode, LabState } from "./state.ts";

/** A lab node being driven through its life with the stock client, watched from every side. */
export interface Walk {
  bm: Baremetal;
  node: LabNode;
  probe: LabNodeProbe;
  /** The conductor's event stream since the walk started (agent connects, provision states, progress). */
  events: RecordedEvent[];
  stopEvents(): void;
}

/**
 * Enrolls the lab's nodes (`baremetal create FILE`, with any more node fields, e.g. a raid_interface) and
 * starts watching the first.
 */
export async function startWalk(state: LabState, nodeFields: Record<string, string> = {}): Promise<Walk> {
  if (state.conductor === null) throw new Error("the lab has no conductor");
  const node = state.nodes[0];
  if (node === undefined) throw new Error("the lab has no node");
  const access = labAccess(state);
  const bm = baremetal(state.conductor.url, access);
  const recorder = recordEvents(state.conductor.url, access);
  await bm.run(["create", await writeEnrollFile(state, nodeFields)]);
  return { bm, node, probe: probeLabNode(node), events: recorder.events, stopEvents: recorder.stop };
}

/**
 * Runs a provision verb with the stock client's --wait (e.g. ["manage"], ["deploy", "--config-drive", X])
 * and resolves with how long it took in ms; rejects when the node lands elsewhere (the client says where).
 */
export async function provision(walk: Walk, verb: string[], timeoutS = 900): Promise<number> {
  const [command, ...rest] = verb;
  if (command === undefined) throw new Error("no verb");
  const started = Date.now();
  await walk.bm.run(["node", command, walk.node.name, ...rest, "--wait", String(timeoutS)], {
    timeoutMs: (timeoutS + 30) * 1000,
  });
  return Date.now() - started;
}

/** The test image as the VMs fetch it from the conductor's /images/ (a file:// source), with its sha256. */
export async function testImage(
  state: LabState,
  file = "anvil-test.qcow2",
): Promise<{ source: string; sha256: string }> {
  const sums = await readFile(join(state.imageRoot, "test-images", "anvil-test.sha256sums"), "utf8");
  const line = sums.split("\n").find((l) => l.trim().endsWith(`  ${file}`));
  if (line === undefined)
    throw new Error(`${file} is not in anvil-test.sha256sums: run \`npm run build:test-images\``);
  // file:// under the image root: the conductor hands the agent a signed, expiring link to it
  return {
    source: `file://${join(state.imageRoot, "test-images", file)}`,
    sha256: line.split(/\s+/)[0] ?? "",
  };
}

/** Points the node's instance_info at an image the VMs can fetch, with its sha256 (the agent verifies it). */
export async function setInstanceImage(walk: Walk, image: { source: string; sha256: string }): Promise<void> {
  await walk.bm.run([
    ...["node", "set", walk.node.name],
    ...["--instance-info", `image_source=${image.source}`],
    ...["--instance-info", "image_os_hash_algo=sha256"],
    ...["--instance-info", `image_os_hash_value=${image.sha256}`],
  ]);
}

/**
 * For each network boot (a VM start with boot order n), how long until the conductor saw the node's agent
 * connect (ms); boots whose agent never connected before the next start are left out.
 */
export function startToAgent(vmStarts: { at: number; order: string }[], events: RecordedEvent[]): number[] {
  const connects = events
    .filter((e) => e.type === "agent" && e.connected === true)
    .map((e) => Date.parse(e.at));
  return vmStarts.flatMap((start, index) => {
    if (start.order !== "n") return [];
    const until = vmStarts[index + 1]?.at ?? Infinity;
    const next = connects.find((at) => at >= start.at && at < until);
    return next === undefined ? [] : [next - start.at];
  });
}

/** The provision states the event stream showed for a node, in order. */
export function provisionStates(events: RecordedEvent[]): string[] {
  return events.filter((e) => e.type === "provision").map((e) => String(e.provision_state));
}
