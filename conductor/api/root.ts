import type { FastifyInstance } from "fastify";
import { type ApiDeps, baseUrl } from "./context.ts";
import { MAX_VERSION_STRING, MIN_VERSION_STRING } from "./microversion.ts";
import { notFound } from "./errors.ts";
import { authorize } from "../auth/policy.ts";
import type { ConductorRecord } from "../../shared/resources.ts";
import { OwnedCounts } from "../cluster/owned-counts.ts";

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
  ["volume", 32],
  ["conductors", 49],
  ["allocations", 52],
  ["events", 54],
  ["deploy_templates", 55],
  ["runbooks", 92],
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

    /** One entry per hostname: its live process, else its most recent one (a restart is not a new conductor). */
    const conductors = async (): Promise<ConductorRecord[]> => {
      await deps.membership.refresh();
      const latest = new Map<string, ConductorRecord>();
      for (const row of deps.membership.all()) {
        const seen = latest.get(row.hostname);
        if (!seen || !deps.membership.isAlive(seen)) latest.set(row.hostname, row);
      }
      return [...latest.values()];
    };
    /** How many nodes the ring gives each live conductor (beyond Ironic: `owned_nodes`). */
    const owned = new OwnedCounts({ store: deps.store, membership: deps.membership });
    const ownedCounts = () => owned.get();
    const view = (row: ConductorRecord, options: { base: string; owned: ReadonlyMap<string, number> }) => {
      const alive = deps.membership.isAlive(row);
      return {
        hostname: row.hostname,
        conductor_group: row.conductor_group,
        alive,
        drivers: row.drivers,
        owned_nodes: alive ? (options.owned.get(row.hostname) ?? 0) : 0,
        created_at: row.created_at,
        updated_at: new Date(row.heartbeat_at).toISOString(),
        links: [
          { href: `${options.base}/v1/conductors/${row.hostname}`, rel: "self" },
          { href: `${options.base}/conductors/${row.hostname}`, rel: "bookmark" },
        ],
      };
    };

    app.get("/v1/conductors", async (request) => {
      authorize("baremetal:conductor:get", request.identity);
      const [rows, owned] = [await conductors(), await ownedCounts()];
      return { conductors: rows.map((row) => view(row, { base: baseUrl(request), owned })) };
    });
    app.get<{ Params: { hostname: string } }>("/v1/conductors/:hostname", async (request) => {
      authorize("baremetal:conductor:get", request.identity);
      const row = (await conductors()).find((r) => r.hostname === request.params.hostname);
      if (!row) throw notFound(`Conductor ${request.params.hostname} could not be found.`);
      return view(row, { base: baseUrl(request), owned: await ownedCounts() });
    });
  };
}
