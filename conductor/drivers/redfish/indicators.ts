import { z } from "zod";
import { Invalid } from "../../errors.ts";
import type {
  CallOptions,
  DriverNode,
  IndicatorChange,
  IndicatorComponent,
  IndicatorInfo,
  IndicatorMap,
  IndicatorState,
} from "../out-of-band.ts";
import type { RedfishConnections } from "./client.ts";
import { loadSystem, type SystemView } from "./system.ts";

const text = z.string().max(1024);
const ref = z.looseObject({ "@odata.id": text });

/** What of a System or Chassis names and lights its indicator (read beside the driver's own schemas). */
const IndicatorHolderSchema = z.looseObject({
  Id: text.optional(),
  UUID: text.nullable().optional(),
  IndicatorLED: text.nullable().optional(),
  LocationIndicatorActive: z.boolean().nullable().optional(),
  Links: z.looseObject({ Chassis: z.array(ref).max(64).optional() }).optional(),
});
type IndicatorHolder = z.infer<typeof IndicatorHolderSchema>;

// Ironic's redfish properties for an IndicatorLED (its order); LocationIndicatorActive is a boolean: no blinking
const LED: IndicatorInfo = { readonly: false, states: ["blinking", "off", "on"] };
const LOCATION: IndicatorInfo = { readonly: false, states: ["off", "on"] };

/** Redfish IndicatorLED → Ironic's state (Ironic's INDICATOR_MAP); anything else is unknown. */
export function indicatorStateOf(holder: {
  IndicatorLED?: string | null;
  LocationIndicatorActive?: boolean | null;
}): IndicatorState {
  if (holder.IndicatorLED !== undefined && holder.IndicatorLED !== null) {
    return holder.IndicatorLED === "Lit"
      ? "on"
      : holder.IndicatorLED === "Off"
        ? "off"
        : holder.IndicatorLED === "Blinking"
          ? "blinking"
          : "unknown";
  }
  if (typeof holder.LocationIndicatorActive === "boolean")
    return holder.LocationIndicatorActive ? "on" : "off";
  return "unknown";
}

function infoOf(holder: IndicatorHolder): IndicatorInfo | null {
  if (holder.IndicatorLED !== undefined && holder.IndicatorLED !== null) return LED;
  if (typeof holder.LocationIndicatorActive === "boolean") return LOCATION;
  return null;
}

/** Ironic names a system's and a chassis' indicator by the resource's UUID; the Id where there is none. */
function nameOf(holder: IndicatorHolder, path: string): string {
  return holder.UUID || holder.Id || path.split("/").pop() || path;
}

interface Located {
  path: string;
  holder: IndicatorHolder;
  info: IndicatorInfo;
}

/**
 * The node's indicators through Redfish: the System's (IndicatorLED, or LocationIndicatorActive on services
 * that deprecated it) and each linked Chassis'. Drives are not offered (Ironic's `disk` component) yet.
 */
export class RedfishIndicators {
  constructor(private readonly connections: RedfishConnections) {}

  /** @throws InvalidDriverInfo, RedfishError */
  async list(node: DriverNode, options: CallOptions = {}): Promise<IndicatorMap> {
    const view = await loadSystem(this.connections, node, options.signal);
    const found = await this.all(view, options.signal);
    const map: IndicatorMap = {};
    for (const [component, byName] of found) {
      map[component] = Object.fromEntries([...byName].map(([name, located]) => [name, located.info]));
    }
    return map;
  }

  /** @throws Invalid (unknown indicator), RedfishError */
  async get(
    node: DriverNode,
    indicator: { component: IndicatorComponent; name: string },
    options: CallOptions = {},
  ): Promise<IndicatorState> {
    const located = await this.find(node, indicator, options.signal);
    return indicatorStateOf(located.located.holder);
  }

  /** @throws Invalid (unknown indicator, state it does not offer), RedfishError */
  async set(node: DriverNode, indicator: IndicatorChange, options: CallOptions = {}): Promise<void> {
    const { state } = indicator;
    const { view, located } = await this.find(node, indicator, options.signal);
    if (!located.info.states.includes(state))
      throw new Invalid(
        `Indicator ${indicator.name}@${indicator.component} of node ${node.uuid} cannot be set to ${state}; ` +
          `it offers ${located.info.states.join(", ")}`,
      );
    const body =
      located.holder.IndicatorLED !== undefined && located.holder.IndicatorLED !== null
        ? { IndicatorLED: state === "on" ? "Lit" : state === "off" ? "Off" : "Blinking" }
        : { LocationIndicatorActive: state === "on" };
    await view.client.request({ method: "PATCH", path: located.path, body, signal: options.signal });
  }

  private async find(
    node: DriverNode,
    indicator: { component: IndicatorComponent; name: string },
    signal: AbortSignal | undefined,
  ): Promise<{ view: SystemView; located: Located }> {
    const view = await loadSystem(this.connections, node, signal);
    const located = (await this.all(view, signal)).get(indicator.component)?.get(indicator.name);
    // Ironic's MissingParameterValue (400), its text
    if (!located)
      throw new Invalid(
        `Unknown indicator ${indicator.name} for component ${indicator.component} of node ${node.uuid}`,
      );
    return { view, located };
  }

  private async all(
    view: SystemView,
    signal: AbortSignal | undefined,
  ): Promise<Map<IndicatorComponent, Map<string, Located>>> {
    const found = new Map<IndicatorComponent, Map<string, Located>>();
    const add = (component: IndicatorComponent, path: string, holder: IndicatorHolder) => {
      const info = infoOf(holder);
      if (!info) return;
      const byName = found.get(component) ?? new Map<string, Located>();
      byName.set(nameOf(holder, path), { path, holder, info });
      found.set(component, byName);
    };
    const system = IndicatorHolderSchema.safeParse(view.system);
    if (!system.success) return found;
    // chassis first, then the system, as Ironic lists them
    for (const link of system.data.Links?.Chassis ?? []) {
      const path = link["@odata.id"];
      add("chassis", path, await view.client.get(path, IndicatorHolderSchema, signal));
    }
    add("system", view.path, system.data);
    return found;
  }
}
