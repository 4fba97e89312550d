import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { InventorySchema } from "../../shared/inventory.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import { UUID } from "../../shared/api.ts";
import { isMac, normalizeMac } from "../drivers/boot/mac.ts";
import { discoverNode } from "../operations/discovery.ts";
import type { ApiDeps } from "./context.ts";
import { badRequest, notFound } from "./errors.ts";
import { lookupAnswer } from "./lookup.ts";
import { parseQuery } from "./query.ts";

/** Ironic's MINOR_84_CONTINUE_INSPECTION. */
export const CONTINUE_INSPECTION_MINOR = 84;

/** Ironic's DATA_VALIDATOR (an inventory with at least one interface), then IPA's full inventory shape. */
const ContinueInspectionBody = z
  .object({
    inventory: z
      .object({
        bmc_address: z.string().nullable().optional(),
        bmc_v6address: z.string().nullable().optional(),
        interfaces: z.array(z.object({ mac_address: z.string() }).loose()).min(1),
      })
      .loose(),
  })
  .loose();

const ContinueInspectionQuery = z.object({ node_uuid: UUID.optional() }).strict();

/** Every failure to find a node is the same 404: the caller learns nothing about nodes it may not reach. */
const lookupFailed = () => notFound("Resource could not be found.");

/** The host of a driver_info `*_address` value (a URL's host, brackets off an IPv6 literal). */
function hostOf(address: string): string {
  const host = address.includes("//")
    ? URL.canParse(address)
      ? new URL(address).hostname
      : address
    : address;
  return host.replace(/^\[/, "").replace(/\]$/, "");
}

function bmcAddressesOf(node: NodeRecord): Set<string> {
  const hosts = new Set<string>();
  for (const [key, value] of Object.entries(node.driver_info))
    if (key.endsWith("_address") && typeof value === "string") hosts.add(hostOf(value));
  return hosts;
}

/**
 * Ironic's inspect_utils.lookup_node: the node by uuid, by the ports of the inventory's MACs (all must name one
 * node), then by BMC address among the nodes waiting for inspection; it must be in `inspect wait`. Null when
 * nothing names any node (a machine auto-discovery may enroll).
 * @throws NotFound (404, one text for every failure)
 */
async function lookupNode(
  deps: ApiDeps,
  keys: { uuid?: string; macs: string[]; bmc: string[] },
): Promise<NodeRecord | null> {
  let node = keys.uuid === undefined ? null : await deps.store.getNode(keys.uuid);
  if (keys.uuid !== undefined && node === null) throw lookupFailed();
  for (const address of keys.macs) {
    const [port] = await deps.store.listPorts({ address }, { limit: 1 });
    if (!port) continue;
    if (node !== null && port.node_uuid !== node.uuid) throw lookupFailed();
    node ??= await deps.store.getNode(port.node_uuid);
  }
  if (node !== null && node.provision_state !== "inspect wait") throw lookupFailed();
  if (keys.bmc.length > 0) {
    const waiting = await deps.store.listNodes({ provision_state: "inspect wait" }, {});
    const matching = waiting.filter((n) => keys.bmc.some((address) => bmcAddressesOf(n).has(address)));
    // a BMC address that names another node than the MACs did: the data belongs to neither for sure
    if (node !== null && matching.some((n) => n.uuid !== node!.uuid)) throw lookupFailed();
    if (node === null && matching.length === 1) node = matching[0]!;
    if (node === null && matching.length > 1) throw lookupFailed();
  }
  // no node at all: auto-discovery may enroll the machine (Ironic's AutoEnrollPossible)
  if (node === null && keys.uuid === undefined) return null;
  if (node === null) throw lookupFailed();
  return node;
}

/**
 * POST /v1/continue_inspection (1.84, and 1.1 for ironic-inspector's callers): the inspection data of an
 * IPA-style ramdisk, for a node in `inspect wait` whose own agent has not called back this boot. Anvil's agent
 * sends its inventory over its WebSocket instead; this accepts the same data from another ramdisk.
 */
async function continueInspection(deps: ApiDeps, request: FastifyRequest, reply: FastifyReply) {
  const minor = request.apiMinor;
  const query = parseQuery(ContinueInspectionQuery, request.query);
  const allowed = minor >= CONTINUE_INSPECTION_MINOR || (minor === 1 && query.node_uuid === undefined);
  if (!allowed) throw notFound(`API version 1.${CONTINUE_INSPECTION_MINOR} or newer is required`);
  const body = ContinueInspectionBody.parse(request.body);
  const { inventory: raw, ...pluginData } = body;
  const macs = raw.interfaces
    .map((i) => i.mac_address)
    .filter(isMac)
    .map(normalizeMac);
  const bmc = [raw.bmc_address, raw.bmc_v6address].filter((a): a is string => !!a).map(hostOf);
  if (macs.length === 0 && bmc.length === 0 && query.node_uuid === undefined)
    throw badRequest("No lookup information provided");
  const inventory = InventorySchema.safeParse(raw);
  if (!inventory.success) {
    const issue = inventory.error.issues[0];
    throw badRequest(`Invalid inventory: ${issue?.path.join(".") ?? ""} ${issue?.message ?? ""}`.trim());
  }
  const found = await lookupNode(deps, { uuid: query.node_uuid, macs, bmc });
  if (found === null) {
    if (!deps.config.autoDiscovery.enabled) throw lookupFailed();
    const node = await discoverNode(deps.provisioner, { inventory: inventory.data, plugin_data: pluginData });
    const answer = minor >= CONTINUE_INSPECTION_MINOR ? lookupAnswer(deps, node) : { uuid: node.uuid };
    await reply.code(202).send(answer);
    return;
  }
  const node = found;
  // NOTE: Anvil's own agent already said hello for this boot: data from anyone else is not its node's
  if (
    deps.provisioner.deps.agents.isConnected(node.uuid) ||
    (await deps.store.getAgentToken(node.uuid)) !== null
  )
    throw lookupFailed();
  await deps.provisioner.continueInspection(node, { inventory: inventory.data, plugin_data: pluginData });
  const answer = minor >= CONTINUE_INSPECTION_MINOR ? lookupAnswer(deps, node) : { uuid: node.uuid };
  await reply.code(202).send(answer);
}

/** The ramdisk's inspection callback (Ironic's ContinueInspectionController). */
export function continueInspectionPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    app.post("/v1/continue_inspection", (request, reply) => continueInspection(deps, request, reply));
  };
}
