import { z } from "zod";
import { InvalidDriverInfo } from "../errors.ts";
import type { RedfishClient } from "./client.ts";
import { RedfishError } from "./client.ts";
import type { RedfishConnections } from "./client.ts";
import { parseRedfishDriverInfo } from "./driver-info.ts";
import type { DriverNode } from "../out-of-band.ts";
import { CollectionSchema, ComputerSystemSchema, type ComputerSystem } from "./schemas.ts";
import { quirksFor, type Quirks } from "./quirks.ts";

// the path found for a client without redfish_system_id (the one member of Systems), asked once
const discovered = new WeakMap<RedfishClient, string>();

/**
 * The ComputerSystem's path: the node's redfish_system_id, or the only member of /redfish/v1/Systems. The id
 * comes from the node, never from the client: one client serves every node behind the same BMC and
 * credentials, each with its own system. @throws RedfishError, InvalidDriverInfo
 */
export async function systemPath(
  client: RedfishClient,
  systemId: string | null,
  signal?: AbortSignal,
): Promise<string> {
  if (systemId) return systemId;
  const known = discovered.get(client);
  if (known) return known;
  const root = await client.serviceRoot(signal);
  const collection = root.Systems?.["@odata.id"];
  if (!collection)
    throw new RedfishError(`Redfish service at ${client.info.origin} has no Systems collection`, {
      status: 200,
    });
  const members = (await client.get(collection, CollectionSchema, signal)).Members;
  if (members.length !== 1) {
    throw new InvalidDriverInfo(
      `driver_info.redfish_system_id is required: the Redfish service at ${client.info.origin} has ${members.length} systems`,
    );
  }
  const path = members[0]!["@odata.id"].replace(/\/+$/, "");
  discovered.set(client, path);
  return path;
}

export interface SystemView {
  client: RedfishClient;
  path: string;
  system: ComputerSystem;
  quirks: Quirks;
}

/** Reads the node's ComputerSystem and the quirks its vendor needs. @throws InvalidDriverInfo, RedfishError */
export async function loadSystem(
  connections: RedfishConnections,
  node: DriverNode,
  signal?: AbortSignal,
): Promise<SystemView> {
  const info = parseRedfishDriverInfo(node.driver_info);
  const client = connections.client(info);
  const path = await systemPath(client, info.systemId, signal);
  const system = await client.get(path, ComputerSystemSchema, signal);
  return { client, path, system, quirks: quirksFor(system).quirks };
}

const ManagedBySchema = z.looseObject({
  Links: z
    .looseObject({
      ManagedBy: z
        .array(z.looseObject({ "@odata.id": z.string().max(1024) }))
        .max(16)
        .optional(),
    })
    .optional(),
});

/** The path of the Manager that runs a System: the first of its Links.ManagedBy, or undefined. Pure. */
export function managerPathOf(system: unknown): string | undefined {
  const parsed = ManagedBySchema.safeParse(system);
  return parsed.success ? parsed.data.Links?.ManagedBy?.[0]?.["@odata.id"] : undefined;
}
