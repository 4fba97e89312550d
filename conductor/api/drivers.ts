import type { FastifyInstance } from "fastify";
import type { HardwareType } from "../drivers/hardware-type.ts";
import { type ApiDeps, baseUrl } from "./context.ts";
import { notFound } from "./errors.ts";
import { authorize } from "../auth/policy.ts";
import { FIRMWARE_MINOR } from "./node-subresources.ts";

/** Drivers (hardware types) this conductor can run. */
export function driversPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    const view = (
      hw: HardwareType,
      base: string,
      at: { detail: boolean; minor: number },
    ): Record<string, unknown> => {
      const link = (sub: string) => [
        { href: `${base}/v1/drivers/${hw.name}${sub}`, rel: "self" },
        { href: `${base}/drivers/${hw.name}${sub}`, rel: "bookmark" },
      ];
      const out: Record<string, unknown> = {
        name: hw.name,
        hosts: [deps.config.name],
        links: link(""),
        properties: link("/properties"),
        type: "dynamic",
      };
      if (at.detail) {
        for (const [key, value] of Object.entries(hw.interfaces)) {
          const kind = key.replace(/_interface$/, "");
          if (kind === "firmware" && at.minor < FIRMWARE_MINOR) continue;
          out[`default_${kind}_interface`] = value;
          out[`enabled_${kind}_interfaces`] = [value];
        }
      }
      return out;
    };

    const find = (name: string): HardwareType => {
      const hw = deps.drivers.get(name);
      if (!hw) throw notFound(`Could not find the following driver(s) or hardware type(s): ${name}.`);
      return hw;
    };

    app.get<{ Querystring: { detail?: string } }>("/v1/drivers", async (request) => {
      authorize("baremetal:driver:get", request.identity);
      const detail = request.query.detail === "true" || request.query.detail === "True";
      return {
        drivers: deps.drivers
          .list()
          .map((hw) => view(hw, baseUrl(request), { detail, minor: request.apiMinor })),
      };
    });
    app.get<{ Params: { name: string } }>("/v1/drivers/:name", async (request) => {
      authorize("baremetal:driver:get", request.identity);
      return view(find(request.params.name), baseUrl(request), { detail: true, minor: request.apiMinor });
    });
    app.get<{ Params: { name: string } }>("/v1/drivers/:name/properties", async (request) => {
      authorize("baremetal:driver:get_properties", request.identity);
      return { ...find(request.params.name).properties };
    });
  };
}
