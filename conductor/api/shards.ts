import type { FastifyInstance } from "fastify";
import { authorize } from "../auth/policy.ts";
import type { ApiDeps } from "./context.ts";
import { notFound } from "./errors.ts";

/** Ironic's MINOR_82_NODE_SHARD. */
export const SHARD_MINOR = 82;

/** GET /v1/shards (1.82): how many nodes each shard holds, most first; one shard is not a resource (404). */
export function shardsPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    app.get("/v1/shards", async (request) => {
      if (request.apiMinor < SHARD_MINOR) throw notFound("The API version does not allow shards");
      authorize("baremetal:shards:get", request.identity);
      return { shards: await deps.store.listShards() };
    });
    app.get<{ Params: { name: string } }>("/v1/shards/:name", async (request) => {
      if (request.apiMinor < SHARD_MINOR) throw notFound("The API version does not allow shards");
      throw notFound(`The resource could not be found: GET /v1/shards/${request.params.name}`);
    });
  };
}
