// The benches' fake fleet: nodes written straight through the Store (the API path is measured on its own).
import { newNode } from "../../conductor/operations/node-record.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { openStore } from "../../conductor/db/open-store.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";

const fake = defaultDrivers(defaultConfig()).get("fake-hardware")!;

/** A fake-hardware node as the benches seed it; `fields` override the defaults. */
export function fakeNode(fields: Parameters<typeof newNode>[0]): ReturnType<typeof newNode> {
  return newNode(fields, fake);
}

/**
 * Seeds `count` available, powered-off fake-hardware nodes (10% `large`, 1 in 7 with CUSTOM_FAST), 16 writers at
 * a time. Returns nodes per second.
 */
export async function seedFleet(database: string, count: number): Promise<number> {
  const store = openStore(database);
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < count) {
        const i = next++;
        const large = i % 10 === 0;
        await store.createNode({
          ...fakeNode({ driver: "fake-hardware", name: `bench-${i}` }),
          provision_state: "available",
          power_state: "power off",
          resource_class: large ? "large" : "small",
          traits: i % 7 === 0 ? ["CUSTOM_FAST"] : [],
          properties: {
            memory_mb: large ? 262144 : 16384 * (1 + (i % 4)),
            cpus: large ? 64 : 8,
            local_gb: 500,
          },
        });
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await store.close();
  return count / seconds;
}
