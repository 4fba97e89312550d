import type { FastifyInstance } from "fastify";
import { type ApiDeps, baseUrl } from "./context.ts";
import { MAX_VERSION_STRING, MIN_VERSION_STRING } from "./microversion.ts";
import { notFound } from "./errors.ts";
import { authorize } from "../auth/policy.ts";

/**
 * The resources the /v1 root links to, each with the microversion that introduced it: a client sees only
 * what its version has (Ironic 21.4 at 1.1 lists chassis, nodes, ports and drivers).
 */
const RESOURCES: readonly (readonly [name: string, minor: number])[] = [
  ["chassis", 1],
  ["nodes", 1],
  ["ports", 1],
  ["drivers", 1],
  ["lookup", 22],
  ["conductors", 49],
  ["allocations", 52],
  ["events", 54],
];

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
        links: [
          { href: `${base}/v1/`, rel: "self" },
          {
            href: "https://docs.openstack.org//ironic/latest/contributor//webapi.html",
            rel: "describedby",
            type: "text/html",
          },
        ],
        media_types: { base: "application/json", type: "application/vnd.openstack.ironic.v1+json" },
        version: version(base),
      };
      for (const [resource, minor] of RESOURCES) {
        if (request.apiMinor < minor) continue;
        body[resource] = [
          { href: `${base}/v1/${resource}/`, rel: "self" },
          { href: `${base}/${resource}/`, rel: "bookmark" },
        ];
      }
      return body;
    });

    // Anvil keeps no chassis; the collection exists (empty) so the link above is not a dead end.
    app.get("/v1/chassis", async () => ({ chassis: [] }));
    app.get("/v1/chassis/detail", async () => ({ chassis: [] }));

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
