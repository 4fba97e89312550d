import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { Booleanish } from "../../shared/api.ts";
import type { HardwareType } from "../drivers/hardware-type.ts";
import { NotAcceptable } from "../errors.ts";
import { type ApiDeps, baseUrl } from "./context.ts";
import { badRequest, notFound } from "./errors.ts";
import { authorize } from "../auth/policy.ts";
import { FIRMWARE_MINOR } from "./node-subresources.ts";
import { fieldsParam, parseQuery } from "./query.ts";

/** Ironic's MINOR_77_DRIVER_FIELDS_SELECTOR. */
const DRIVER_FIELDS_MINOR = 77;

/** Interfaces whose default/enabled keys a driver shows only from the microversion that added them. */
const INTERFACE_MINOR: Record<string, number> = {
  storage: 33,
  rescue: 38,
  bios: 40,
  firmware: FIRMWARE_MINOR,
};

const DriverListQuery = z
  .object({ type: z.string().optional(), detail: Booleanish.optional(), fields: fieldsParam })
  .strict();
const DriverShowQuery = z.object({ fields: fieldsParam }).strict();

/** Ironic's _check_allow_driver_fields: `fields` needs 1.77 (a bare 406 below). */
function checkFieldsVersion(fields: readonly string[] | undefined, minor: number): void {
  if (fields !== undefined && minor < DRIVER_FIELDS_MINOR) throw new NotAcceptable("Request not acceptable.");
}

/** Ironic's sanitize_dict then check_for_invalid_fields: keep `fields` (and links); name any it lacks. */
function selectFields(
  view: Record<string, unknown>,
  fields: readonly string[] | undefined,
): Record<string, unknown> {
  if (fields === undefined) return view;
  const kept = Object.fromEntries(
    Object.entries(view).filter(([key]) => key === "links" || fields.includes(key)),
  );
  const invalid = [...new Set(fields)].filter((f) => !(f in kept));
  if (invalid.length) throw badRequest(`Field(s) "${invalid.join(", ")}" are not valid`);
  return kept;
}

/** Drivers (hardware types) this conductor can run. */
export function driversPlugin(deps: ApiDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    const view = (hw: HardwareType, request: FastifyRequest, detail: boolean): Record<string, unknown> => {
      const base = baseUrl(request);
      const minor = request.apiMinor;
      const link = (sub: string) => [
        { href: `${base}/v1/drivers/${hw.name}${sub}`, rel: "self" },
        { href: `${base}/drivers/${hw.name}${sub}`, rel: "bookmark" },
      ];
      const out: Record<string, unknown> = { name: hw.name, hosts: [deps.config.name], links: link("") };
      // Ironic: the properties links from 1.14, the type and the interfaces from 1.30
      if (minor >= 14) out.properties = link("/properties");
      if (minor >= 30) out.type = "dynamic";
      if (detail && minor >= 30) {
        for (const [key, value] of Object.entries(hw.interfaces)) {
          const kind = key.replace(/_interface$/, "");
          if (minor < (INTERFACE_MINOR[kind] ?? 0)) continue;
          out[`default_${kind}_interface`] = value;
          out[`enabled_${kind}_interfaces`] = [
            value,
            ...(hw.alternatives[key as keyof typeof hw.interfaces] ?? []),
          ];
        }
      }
      return out;
    };

    const find = (name: string): HardwareType => {
      const hw = deps.drivers.get(name);
      if (!hw) throw notFound(`Could not find the following driver(s) or hardware type(s): ${name}.`);
      return hw;
    };

    app.get("/v1/drivers", async (request) => {
      const query = parseQuery(DriverListQuery, request.query);
      if (query.fields !== undefined && query.fields.length > 0 && query.detail === true)
        throw badRequest("Can not specify ?detail=True and fields in the same request.");
      authorize("baremetal:driver:get", request.identity);
      if ((query.detail !== undefined || query.type !== undefined) && request.apiMinor < 30)
        throw new NotAcceptable("Request not acceptable. The minimal required API version should be 1.30");
      checkFieldsVersion(query.fields, request.apiMinor);
      if (query.type !== undefined && query.type !== "classic" && query.type !== "dynamic")
        throw badRequest('"type" filter must be one of "classic" or "dynamic", if specified.');
      // no classic drivers (Ironic dropped them in Rocky)
      const hardware = query.type === "classic" ? [] : deps.drivers.list();
      const detail = query.detail === true;
      return { drivers: hardware.map((hw) => selectFields(view(hw, request, detail), query.fields)) };
    });
    app.get<{ Params: { name: string } }>("/v1/drivers/:name", async (request) => {
      const { fields } = parseQuery(DriverShowQuery, request.query);
      authorize("baremetal:driver:get", request.identity);
      checkFieldsVersion(fields, request.apiMinor);
      return selectFields(view(find(request.params.name), request, true), fields);
    });
    app.get<{ Params: { name: string } }>("/v1/drivers/:name/properties", async (request) => {
      authorize("baremetal:driver:get_properties", request.identity);
      return { ...find(request.params.name).properties };
    });
  };
}
