import { afterEach, describe, expect, it } from "vitest";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";
import { RedfishConnections } from "../../conductor/drivers/redfish/client.ts";
import { readBmcClock, setBmcClock } from "../../conductor/drivers/redfish/clock.ts";
import { startRedfishBmc, type RedfishBmc } from "../../scripts/lab/redfish/server.ts";

function nodeFor(bmc: RedfishBmc): DriverNode {
  return {
    uuid: "0c8f1f6e-8d55-4d1c-b8a1-3f0c2e5d9a10",
    name: "clock",
    driver_info: {
      redfish_address: bmc.url,
      redfish_system_id: "/redfish/v1/Systems/node-1",
      redfish_username: "admin",
      redfish_password: "s3cret",
    },
    properties: {},
    instance_info: {},
    driver_internal_info: {},
    ports: [],
  };
}

describe("the BMC clock through Manager.DateTime on the lab BMC", () => {
  const open: { bmc: RedfishBmc; conn: RedfishConnections }[] = [];
  afterEach(async () => {
    for (const { bmc, conn } of open.splice(0)) {
      await conn.close();
      await bmc.stop();
    }
  });
  async function setup(clockOffsetMs: number) {
    const bmc = await startRedfishBmc({ password: "s3cret", systems: [{ id: "node-1" }], clockOffsetMs });
    const conn = new RedfishConnections({ backoffMs: 1 });
    open.push({ bmc, conn });
    return { bmc, conn, node: nodeFor(bmc) };
  }

  it("reads how far the BMC's clock is off, to within a second (the BMC writes whole seconds)", async () => {
    for (const offset of [-3_600_000, 0, 86_400_000 * 40]) {
      const { conn, node } = await setup(offset);
      // the bound is a second (whole seconds) plus half the read's own round trip, however long a loaded
      // machine makes that (a fixed 1.5 s left 0.5 s for it)
      const stamps: number[] = [];
      const now = (): number => (stamps.push(Date.now()), stamps.at(-1)!);
      const clock = await readBmcClock(conn, node, { now });
      const halfTrip = (stamps.at(-1)! - stamps[0]!) / 2;
      expect(clock.offsetMs - offset).toBeGreaterThan(-1000 - halfTrip - 1);
      expect(clock.offsetMs - offset).toBeLessThanOrEqual(halfTrip + 1);
      expect(clock.localOffset).toBe("+00:00");
    }
  });

  it("sets it to the conductor's time by default, or to a given time and local offset", async () => {
    const { bmc, conn, node } = await setup(-7_200_000);
    // bounds of a second (whole seconds) plus what the calls took (twice that for a set then a read), not a
    // fixed allowance for it
    let started = Date.now();
    await setBmcClock(conn, node, {});
    expect(Math.abs(bmc.manager.clockOffsetMs)).toBeLessThanOrEqual(1000 + (Date.now() - started));
    started = Date.now();
    await setBmcClock(conn, node, { targetDatetime: "2030-01-02T03:04:05.678+00:00", localOffset: "+02:00" });
    expect(bmc.manager.localOffset).toBe("+02:00");
    const clock = await readBmcClock(conn, node);
    // whole seconds sent, as Ironic strips microseconds for a BMC that shows none
    expect(bmc.requests).toContain("PATCH /redfish/v1/Managers/BMC");
    const ended = Date.now();
    expect(Math.abs(ended + clock.offsetMs - Date.parse("2030-01-02T03:04:05Z"))).toBeLessThanOrEqual(
      1000 + 2 * (ended - started),
    );
  });

  it("refuses a target that is not a time before anything is written", async () => {
    const { bmc, conn, node } = await setup(0);
    await expect(setBmcClock(conn, node, { targetDatetime: "yesterday" })).rejects.toThrow(/not an ISO 8601/);
    expect(bmc.requests).not.toContain("PATCH /redfish/v1/Managers/BMC");
  });
});
