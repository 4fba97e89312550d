import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { NodeRecord } from "../../shared/resources.ts";
import { normalizeMac } from "../drivers/boot/mac.ts";
import type { ApiDeps } from "./context.ts";
import { notFound } from "./errors.ts";
import { parseQuery } from "./query.ts";
import { lookupAllowed } from "../agents/directory-store.ts";

const LookupQuery = z
  .object({
    addresses: z.string().max(2048).optional(),
    node_uuid: z.string().max(64).optional(),
  })
  .strict();

/**
 * GET /v1/lookup: the agent's node lookup by MAC (Ironic's shape). It reveals only a few fields and only
 * for nodes that expect an agent; Anvil's agent does the same over its WebSocket hello.
 */
export function lookupPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    app.get("/v1/lookup", async (request) => {
      const query = parseQuery(LookupQuery, request.query);
      const macs = (query.addresses ?? "")
        .split(",")
        .filter(Boolean)
        .map((m) => normalizeMac(m));
      let node = query.node_uuid ? await deps.store.getNode(query.node_uuid) : null;
      for (const address of macs) {
        if (node) break;
        const [port] = await deps.store.listPorts({ address }, { limit: 1 });
        if (port) node = await deps.store.getNode(port.node_uuid);
      }
      if (!node || !lookupAllowed(node, deps.config.agent.fastTrack)) {
        throw notFound("Node could not be found.");
      }
      return lookupAnswer(deps, node);
    });
  };
}

/** Ironic's lookup answer (also continue_inspection's from 1.84): the few fields a ramdisk needs, and config. */
export function lookupAnswer(deps: ApiDeps, node: NodeRecord): Record<string, unknown> {
  return {
    node: {
      uuid: node.uuid,
      properties: { root_device: node.properties.root_device },
      instance_info: {},
      driver_internal_info: {},
    },
    config: {
      heartbeat_timeout: deps.config.agent.heartbeatTimeoutS,
      agent_url: "/v1/agent",
    },
  };
}
