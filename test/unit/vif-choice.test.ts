import { describe, expect, it } from "vitest";
import { type PortRecord, type PortgroupRecord, newPortRecord } from "../../shared/resources.ts";
import { chooseFreePortLike, portLikeWithVif } from "../../conductor/drivers/network/vif.ts";

const port = (uuid: string, extra: Partial<PortRecord> = {}): PortRecord =>
  newPortRecord({ uuid, address: `52:54:00:00:00:${uuid.slice(-2)}`, node_uuid: "n", ...extra });
const group = (uuid: string, extra: Partial<PortgroupRecord> = {}): PortgroupRecord => ({
  uuid,
  name: null,
  address: null,
  node_uuid: "n",
  standalone_ports_supported: true,
  internal_info: {},
  extra: {},
  mode: "active-backup",
  properties: {},
  physical_network: null,
  category: null,
  dynamic_portgroup: false,
  created_at: "2026-01-01T00:00:00Z",
  updated_at: null,
  ...extra,
});

describe("choosing the port a VIF goes to (Ironic's get_free_port_like_object)", () => {
  it("prefers a port group with member ports, then PXE-enabled lone ports", () => {
    const ports = [port("p1", { pxe_enabled: false }), port("p2"), port("p3", { portgroup_uuid: "g1" })];
    expect(chooseFreePortLike(ports, [group("g1")], { id: "v" }).record.uuid).toBe("g1");
    expect(chooseFreePortLike(ports.slice(0, 2), [group("g1")], { id: "v" }).record.uuid).toBe("p2");
  });

  it("skips ports holding another VIF and honours port_uuid", () => {
    const ports = [port("p1", { internal_info: { tenant_vif_port_id: "other" } }), port("p2")];
    expect(chooseFreePortLike(ports, [], { id: "v" }).record.uuid).toBe("p2");
    expect(() => chooseFreePortLike(ports, [], { id: "v", port_uuid: "p1" })).toThrow(
      "Unable to attach VIF v, not enough free physical ports.",
    );
  });

  it("refuses a VIF already attached, naming where", () => {
    const ports = [port("p1", { internal_info: { tenant_vif_port_id: "v" } }), port("p2")];
    expect(() => chooseFreePortLike(ports, [], { id: "v" })).toThrow(
      "Unable to attach VIF because VIF v is already attached to Ironic Port p1",
    );
  });

  it("finds the holder of a VIF for detach, the legacy extra.vif_port_id too", () => {
    const ports = [port("p1", { extra: { vif_port_id: "old" } })];
    expect(portLikeWithVif(ports, [], { id: "old", node: "n" }).record.uuid).toBe("p1");
    expect(() => portLikeWithVif(ports, [], { id: "x", node: "n" })).toThrow(
      "Unable to detach VIF x from node n because it is not attached to it.",
    );
  });
});
