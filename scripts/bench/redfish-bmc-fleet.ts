// A fleet of simulated Redfish BMCs for the power-sync bench, as a child process (so the conductor's CPU is
// measured alone): one lab BMC (in-memory machine, powered off) per loopback address 127.1.x.y, all on one
// port, each answering after `latencyMs`. Prints {"ready": n} once every one listens.
//   node --import tsx scripts/bench/redfish-bmc-fleet.ts <first index> <count> <port> <latency ms>
import { startRedfishBmc, type RedfishBmc } from "../lab/redfish/server.ts";

/** The loopback address of simulated BMC `i` (250 per /24, never .0 or .255). */
export function benchBmcHost(i: number): string {
  return `127.1.${Math.floor(i / 250)}.${(i % 250) + 1}`;
}

async function main(): Promise<void> {
  const [first, count, port, latency] = process.argv.slice(2).map(Number);
  const bmcs: RedfishBmc[] = [];
  for (let i = first!; i < first! + count!; i++) {
    bmcs.push(
      await startRedfishBmc({
        systems: [{ id: "1" }],
        host: benchBmcHost(i),
        port: port!,
        latencyMs: latency!,
      }),
    );
  }
  console.log(JSON.stringify({ ready: bmcs.length }));
  process.on("SIGTERM", () => void Promise.all(bmcs.map((b) => b.stop())).then(() => process.exit(0)));
}

if (process.argv[1]?.endsWith("redfish-bmc-fleet.ts")) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
