import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import type { IndicatorComponent } from "../drivers/out-of-band.ts";
import {
  GET_INDICATOR_STATE,
  LIST_INDICATORS,
  SET_INDICATOR_STATE,
  getIndicatorState,
  listIndicators,
  setIndicatorState,
} from "../operations/indicators.ts";
import { baseUrl, type ApiDeps } from "./context.ts";
import { badRequest, notFound } from "./errors.ts";
import { type IdentParams, calls, nodeFor } from "./node-request.ts";

/** Ironic's MINOR_63_INDICATORS. */
export const INDICATORS_MINOR = 63;

const COMPONENTS: readonly IndicatorComponent[] = ["system", "chassis", "disk", "power", "nic"];

type IndicatorParams = { Params: { ident: string; indicator: string } };

// Ironic's api-ref writes the states in capitals, its code in small letters: either is taken, small ones given
const StateBody = z.object({
  state: z
    .string()
    .max(32)
    .transform((state) => state.toLowerCase())
    .pipe(z.enum(["on", "off", "blinking"], { error: "must be one of on, off, blinking" })),
});

function requireVersion(request: FastifyRequest): void {
  if (request.apiMinor < INDICATORS_MINOR) throw notFound("The resource could not be found.");
}

/**
 * `name@component` as Ironic's IndicatorAtComponent splits it (at the first `@`).
 * @throws Invalid (Ironic's texts) for a name without `@` or a component Ironic does not know
 */
export function parseIndicator(unique: string): { component: IndicatorComponent; name: string } {
  const at = unique.indexOf("@");
  if (at < 0) throw badRequest(`Malformed indicator name "${unique}"`);
  const name = unique.slice(0, at);
  const component = unique.slice(at + 1);
  if (name === "" || !(COMPONENTS as readonly string[]).includes(component))
    throw badRequest(`Malformed indicator name "${unique}"`);
  return { component: component as IndicatorComponent, name };
}

/** Ironic's IndicatorController: GET …/indicators, GET and PUT …/indicators/{name@component} (1.63). */
export function nodeIndicatorRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const path = "/v1/nodes/:ident/management/indicators";
  app.get<IdentParams>(path, calls(LIST_INDICATORS), async (request) => {
    requireVersion(request);
    const node = await nodeFor(deps, request, "baremetal:node:get_indicator_state");
    const map = await listIndicators(deps.provisioner, node);
    const url = baseUrl(request);
    const indicators = Object.entries(map).flatMap(([component, byName]) =>
      Object.entries(byName ?? {}).map(([name, info]) => {
        const unique = `${name}@${component}`;
        // Ironic's links name the node as the request did
        const href = `nodes/${request.params.ident}/management/indicators/${unique}`;
        return {
          name: unique,
          component,
          readonly: info.readonly,
          states: info.states,
          links: [
            { href: `${url}/v1/${href}`, rel: "self" },
            { href: `${url}/${href}`, rel: "bookmark" },
          ],
        };
      }),
    );
    return { indicators };
  });
  app.get<IndicatorParams>(`${path}/:indicator`, calls(GET_INDICATOR_STATE), async (request) => {
    requireVersion(request);
    const node = await nodeFor(deps, request, "baremetal:node:get_indicator_state");
    return {
      state: await getIndicatorState(deps.provisioner, node, parseIndicator(request.params.indicator)),
    };
  });
  app.put<IndicatorParams>(
    `${path}/:indicator`,
    calls(SET_INDICATOR_STATE),
    async (request, reply: FastifyReply) => {
      requireVersion(request);
      const node = await nodeFor(deps, request, "baremetal:node:set_indicator_state");
      const indicator = parseIndicator(request.params.indicator);
      const body = StateBody.parse(request.body);
      await setIndicatorState(deps.provisioner, node, { ...indicator, state: body.state });
      await reply.code(204).send();
    },
  );
}
