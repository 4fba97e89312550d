// A node's network_data (1.66) is checked on create and PATCH with the rules the ramdisk applies to it from a
// virtual-media ISO (shared/network-data.ts), as Ironic's validate_network_data: a bad one is a 400 naming the
// field, and the stored node does not change.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, faultOf, startConductor } from "../helpers/conductor.ts";

let ctx: Awaited<ReturnType<typeof startConductor>>;
const at = { "X-OpenStack-Ironic-API-Version": "1.66" };

const GOOD = {
  links: [
    { id: "p0", type: "phy", ethernet_mac_address: "52:54:00:66:00:01" },
    { id: "p1", type: "phy", ethernet_mac_address: "52:54:00:66:00:02" },
    { id: "bond0", type: "bond", bond_links: ["p0", "p1"], bond_mode: "active-backup" },
  ],
  networks: [{ id: "n0", type: "ipv4", link: "bond0", ip_address: "10.0.0.5", netmask: "255.255.255.0" }],
  services: [{ type: "dns", address: "10.0.0.1" }],
};

const create = (network_data: unknown) =>
  api(`${ctx.url}/v1/nodes`, {
    method: "POST",
    headers: at,
    body: { driver: "fake-hardware", network_data },
  });

beforeAll(async () => {
  ctx = await startConductor({ fakeDelayMs: 0 });
});
afterAll(async () => {
  await ctx?.stop();
});

describe("network_data on a node", () => {
  it("is stored when the ramdisk could apply it, and refused with the field named when not", async () => {
    const made = await create(GOOD);
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect((made.body as { network_data: unknown }).network_data).toEqual(GOOD);

    const bondless = await create({ links: [{ id: "b", type: "bond" }] });
    expect(bondless.status).toBe(400);
    expect(faultOf(bondless.body)).toBe(
      "Invalid network_data: links[0].bond_links: a bond link needs its member links",
    );
    const dangling = await create({ ...GOOD, networks: [{ type: "ipv4_dhcp", link: "eth9" }] });
    expect(dangling.status).toBe(400);
    expect(faultOf(dangling.body)).toBe('Invalid network_data: networks[0].link: no link has the id "eth9"');
  });

  it("refuses a bad PATCH and leaves the stored value as it was", async () => {
    const uuid = (await create(GOOD)).body as { uuid: string };
    const patch = (value: unknown) =>
      api(`${ctx.url}/v1/nodes/${uuid.uuid}`, {
        method: "PATCH",
        headers: at,
        body: [{ op: "replace", path: "/network_data", value }],
      });
    const bad = await patch({ links: [{ id: "p0", type: "phy", ethernet_mac_address: "not-a-mac" }] });
    expect(bad.status).toBe(400);
    expect(faultOf(bad.body)).toMatch(/^Invalid network_data: links\[0\]\.ethernet_mac_address: /);
    const stored = await ctx.conductor.store.getNode(uuid.uuid);
    expect(stored?.network_data).toEqual(GOOD);
    const cleared = await patch({});
    expect(cleared.status).toBe(200);
  });

  it("answers 201 or 400 in Ironic's envelope for generated values, never a 5xx", async () => {
    const link = fc.record(
      {
        id: fc.oneof(fc.constantFrom("p0", "p1", "bond0", ""), fc.string({ maxLength: 8 })),
        type: fc.constantFrom("phy", "vif", "bond", "vlan", "tap", ""),
        ethernet_mac_address: fc.oneof(fc.constant("52:54:00:66:00:09"), fc.string({ maxLength: 20 })),
        bond_links: fc.array(fc.constantFrom("p0", "p1", "x"), { maxLength: 3 }),
        vlan_link: fc.constantFrom("p0", "x"),
        vlan_id: fc.oneof(fc.integer({ min: -5, max: 5000 }), fc.constant("7")),
        mtu: fc.oneof(fc.integer(), fc.constant(null)),
      },
      { requiredKeys: ["id", "type"] },
    );
    const network = fc.record(
      {
        type: fc.constantFrom("ipv4", "ipv6", "ipv4_dhcp", "ipv6_slaac", "bogus"),
        link: fc.constantFrom("p0", "bond0", "nope"),
        ip_address: fc.oneof(fc.constantFrom("10.0.0.5/24", "fd00::5", "10.0.0.5/99"), fc.string()),
        netmask: fc.oneof(fc.constantFrom("255.255.255.0", "255.0.255.0", "64"), fc.string()),
        routes: fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 2 }),
      },
      { requiredKeys: ["type", "link"] },
    );
    const value = fc.oneof(
      fc.record({ links: fc.array(link, { maxLength: 4 }), networks: fc.array(network, { maxLength: 3 }) }),
      fc.jsonValue({ maxDepth: 4 }),
    );
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(value, async (network_data) => {
        const r = await create(network_data);
        expect([201, 400], JSON.stringify(r.body)).toContain(r.status);
        if (r.status === 400) expect(faultOf(r.body).length).toBeGreaterThan(0);
        else accepted += 1;
      }),
      { numRuns: 200 },
    );
    // the generator reaches both sides
    expect(accepted).toBeGreaterThan(0);
    expect(accepted).toBeLessThan(200);
  });
});
