import type { Store } from "../db/store.ts";
import type { ConductorMetrics } from "./metrics.ts";

/** What a scrape reads besides the registry: node counts from the store, subscribers from the event hub. */
export interface ScrapeSources {
  store: Pick<Store, "countNodesBy">;
  events: { subscribers: number };
  metrics: ConductorMetrics;
}

/** One Prometheus scrape: the node gauges are counted by the store now, then the registry is rendered. */
export async function scrapeMetrics(sources: ScrapeSources): Promise<{ contentType: string; text: string }> {
  const { store, metrics } = sources;
  const [byState, byPower, byFault] = await Promise.all([
    store.countNodesBy("provision_state"),
    store.countNodesBy("power_state"),
    store.countNodesBy("fault"),
  ]);
  delete byFault.none;
  metrics.setNodeCounts({ byState, byPower, byFault });
  metrics.setEventSubscribers(sources.events.subscribers);
  return { contentType: metrics.registry.contentType, text: await metrics.registry.metrics() };
}
