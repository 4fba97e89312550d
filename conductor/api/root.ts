import type { FastifyInstance } from "fastify";
import { type ApiDeps, baseUrl } from "./context.ts";
import { MAX_VERSION_STRING, MIN_VERSION_STRING } from "./microversion.ts";
import { notFound } from "./errors.ts";
import { authorize } from "../auth/policy.ts";

const RESOURCES = ["nodes", "ports", "drivers", "allocations", "conductors", "lookup", "events"];

/** Version discovery (GET / and /v1) and the conductor registry. */
export function rootPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    const version = (base: string) => ({
      id: "v1",
      links: [{ href: `${base}/v1/`, rel: "self" }],
      status: "CURRENT",
      min_version: MIN_VERSION_STRING,
      version: MAX_VERSION_STRING,
    });

    app.get("/", async (request) => {
      const base = baseUrl(request);
      return {
        name: "Anvil Bare Metal API (OpenStack Ironic compatible)",
        description:
          "Anvil provisions bare-metal machines; this endpoint speaks the Ironic Bare Metal API v1.",
        default_version: version(base),
        versions: [version(base)],
      };
    });

    app.get("/v1", async (request) => {
      const base = baseUrl(request);
      const body: Record<string, unknown> = {
        id: "v1",
        links: [{ href: `${base}/v1/`, rel: "self" }],
        media_types: { base: "application/json", type: "application/vnd.openstack.ironic.v1+json" },
        version: version(base),
      };
      for (const resource of RESOURCES) {
        body[resource] = [
          { href: `${base}/v1/${resource}/`, rel: "self" },
          { href: `${base}/${resource}/`, rel: "bookmark" },
        ];
      }
      return body;
    });

    const conductor = (base: string) => ({
      hostname: deps.config.name,
      conductor_group: "",
      alive: true,
      drivers: deps.drivers.list().map((d) => d.name),
      created_at: deps.startedAt.toISOString(),
      updated_at: new Date().toISOString(),
      links: [
        { href: `${base}/v1/conductors/${deps.config.name}`, rel: "self" },
        { href: `${base}/conductors/${deps.config.name}`, rel: "bookmark" },
      ],
    });

    app.get("/v1/conductors", async (request) => {
      authorize("baremetal:conductor:get", request.identity);
      return { conductors: [conductor(baseUrl(request))] };
    });
    app.get<{ Params: { hostname: string } }>("/v1/conductors/:hostname", async (request) => {
      authorize("baremetal:conductor:get", request.identity);
      if (request.params.hostname !== deps.config.name) {
        throw notFound(`Conductor ${request.params.hostname} could not be found.`);
      }
      return conductor(baseUrl(request));
    });
  };
}
