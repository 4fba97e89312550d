import { Membership } from "../../conductor/cluster/membership.ts";
import type { Store } from "../../conductor/db/store.ts";
import { silentLogger } from "../../shared/log.ts";

/** A conductor's membership on `store` with Ironic's timings (beat 10 s, dead after 60 s) and the test's clock. */
export function testMembership(store: Store, hostname: string, now: () => number): Membership {
  return new Membership(store, {
    hostname,
    group: "",
    drivers: ["fake-hardware"],
    heartbeatIntervalS: 10,
    deadAfterS: 60,
    logger: silentLogger,
    now,
  });
}
