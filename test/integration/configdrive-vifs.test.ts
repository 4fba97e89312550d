import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, provisionThrough, released, startConductor, waitForState } from "../helpers/conductor.ts";
import { readConfigDrive } from "../helpers/config-drive.ts";

/**
 * A config drive the conductor builds from the JSON form (1.56) carries the node's attached VIFs in its
 * network_data.json, as Ironic's network interface describes them; one given with network_data keeps it.
 */
describe("VIFs in the config drive the conductor builds", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  beforeAll(async () => {
    ctx = await startConductor({ fakeDelayMs: 0 });
  });
  afterAll(async () => {
    await ctx?.stop();
  });

  /** An available fake-hardware node with ports `macs`, the VIF `vif` (if any) attached through the API. */
  async function availableNode(name: string, macs: string[], vif?: string): Promise<string> {
    const created = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      body: { name, driver: "fake-hardware" },
    });
    const uuid = (created.body as { uuid: string }).uuid;
    for (const address of macs) {
      const port = await api(`${ctx.url}/v1/ports`, { method: "POST", body: { node_uuid: uuid, address } });
      expect(port.status).toBe(201);
    }
    if (vif !== undefined) {
      const attached = await api(`${ctx.url}/v1/nodes/${uuid}/vifs`, { method: "POST", body: { id: vif } });
      expect(attached.status).toBe(204);
    }
    await provisionThrough(ctx.url, uuid, [
      ["manage", "manageable"],
      ["provide", "available"],
    ]);
    await released(ctx.url, uuid); // a PATCH of a node still held is refused 409
    const patched = await api(`${ctx.url}/v1/nodes/${uuid}`, {
      method: "PATCH",
      body: [{ op: "add", path: "/instance_info/image_source", value: "http://127.0.0.1:9/disk.raw" }],
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    return uuid;
  }

  /** Deploys with the config drive in its JSON form and reads back the ISO the conductor stored. */
  async function deployedDrive(uuid: string, configdrive: Record<string, unknown>) {
    const response = await api(`${ctx.url}/v1/nodes/${uuid}/states/provision`, {
      method: "PUT",
      body: { target: "active", configdrive },
    });
    expect(response.status).toBe(202);
    await waitForState(ctx.url, uuid, "active");
    const stored = (await ctx.conductor.store.getNode(uuid))?.instance_info.configdrive;
    expect(typeof stored).toBe("string");
    return readConfigDrive(String(stored));
  }

  it("a JSON config drive without network_data gets a link per attached VIF with its port's MAC", async () => {
    const vif = "7d1f3c1e-2a4b-4c5d-8e9f-0a1b2c3d4e01";
    const uuid = await availableNode("cd-v1", ["52:54:00:23:01:01", "52:54:00:23:01:02"], vif);
    const holders = (await ctx.conductor.store.listPorts({ node_uuid: uuid }, {})).filter(
      (p) => p.internal_info.tenant_vif_port_id === vif,
    );
    expect(holders).toHaveLength(1);
    const [port] = holders;
    const drive = await deployedDrive(uuid, {
      meta_data: { hostname: "cd-v1" },
      user_data: "#cloud-config\n",
    });
    expect(drive.meta_data).toEqual({ hostname: "cd-v1" });
    expect(drive.user_data).toBe("#cloud-config\n");
    expect(drive.network_data).toEqual({
      links: [{ id: port?.uuid, type: "vif", ethernet_mac_address: port?.address, vif_id: vif }],
      networks: [{ id: "network0", type: "ipv4_dhcp", link: port?.uuid, network_id: vif }],
      services: [],
    });
  });

  it("network_data given in the request is written as given", async () => {
    const uuid = await availableNode("cd-v2", ["52:54:00:23:02:01"], "7d1f3c1e-2a4b-4c5d-8e9f-0a1b2c3d4e02");
    const network_data = { links: [{ id: "eth0", type: "phy", ethernet_mac_address: "52:54:00:99:99:99" }] };
    const drive = await deployedDrive(uuid, { meta_data: {}, network_data });
    expect(drive.network_data).toEqual(network_data);
  });

  it("a node with no VIF gets no network_data.json", async () => {
    const uuid = await availableNode("cd-v3", ["52:54:00:23:03:01"]);
    const drive = await deployedDrive(uuid, { meta_data: { hostname: "cd-v3" } });
    expect(drive.network_data).toBeNull();
  });
});
