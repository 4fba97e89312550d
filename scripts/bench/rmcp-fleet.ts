// One process of the stand-in BMC fleet for the power status bench: serves BMCs first..first+count-1 (each on
// its own 127.100.x.y address, `port`), prints "ready <count>" once all listen, and runs until stdin closes
// or SIGTERM. Every third BMC is powered off, the rest on, so a sweep's answers can be checked.
// Run: node --import tsx scripts/bench/rmcp-fleet.ts <first> <count> <port> (credentials in the environment:
// FLEET_USERNAME, FLEET_PASSWORD)
import { RmcpBmcFleet } from "../../test/helpers/rmcp-fleet.ts";

/** The power the bench's fleet gives BMC `index`: every third one off. */
export function fleetPowerOf(index: number): boolean {
  return index % 3 !== 0;
}

async function main(): Promise<void> {
  const [first, count, port] = process.argv.slice(2).map(Number) as [number, number, number];
  const fleet = await RmcpBmcFleet.start({
    first,
    count,
    port,
    username: process.env.FLEET_USERNAME ?? "admin",
    password: process.env.FLEET_PASSWORD ?? "",
    powerOf: fleetPowerOf,
  });
  process.stdout.write(`ready ${count}\n`);
  const stop = (): void => void fleet.stop().then(() => process.exit(0));
  process.stdin.on("end", stop).resume();
  process.once("SIGTERM", stop);
}

if (process.argv[1]?.endsWith("rmcp-fleet.ts")) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
