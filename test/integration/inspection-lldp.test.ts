import { mkdtempSync, rmSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { RawTlv } from "../../shared/lldp.ts";
import { api, provisionThrough, spawnConductor, waitForState } from "../helpers/conductor.ts";
import { ensureAgentBuilt, sampleInventory, startAgentProcess } from "../helpers/agent.ts";

const MACS = ["52:54:00:27:00:01", "52:54:00:27:00:02", "52:54:00:27:00:03"];
const hex = (text: string): string => Buffer.from(text, "utf8").toString("hex");
/** A switch's frame: MAC chassis id, port "xe-0/0/<n>" (subtype ifName), system name, a VLAN, the MTU. */
const frame = (port: number): RawTlv[] => [
  [1, "04a0b1c2d3e4f5"],
  [2, `05${hex(`xe-0/0/${port}`)}`],
  [3, "0078"],
  [4, hex(`server port ${port}`)],
  [5, hex("tor-a1.example")],
  [127, `0080c203${(100).toString(16).padStart(4, "0")}04${hex("prov")}`],
  [127, "00120f042328"],
  [0, ""],
];

/**
 * The agent's collectors (a simulated machine's lldp_raw, pci_devices, numa_topology) through a real agent
 * process and conductor: inspection stores them as plugin_data, parses LLDP as Ironic's parse-lldp hook, and
 * fills each port's local_link_connection as its local-link-connection hook (an operator's key kept).
 */
describe("inspection with LLDP", () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-inspect-lldp-"));
  const stops: (() => unknown)[] = [];
  afterAll(async () => {
    for (const stop of stops.reverse()) await stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("fills the ports' local_link_connection from the frames each NIC heard", async () => {
    const executable = await ensureAgentBuilt();
    const conductor = await spawnConductor(["--db", join(dir, "anvil.sqlite"), "--data-dir", dir]);
    stops.push(() => conductor.child.kill("SIGKILL"));
    const { url } = conductor;
    const created = await api(`${url}/v1/nodes`, {
      method: "POST",
      body: { name: "ll", driver: "fake-hardware", inspect_interface: "agent" },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const uuid = (created.body as { uuid: string }).uuid;
    const eth0 = await api(`${url}/v1/ports`, {
      method: "POST",
      body: { node_uuid: uuid, address: MACS[0] },
    });
    expect(eth0.status, JSON.stringify(eth0.body)).toBe(201);
    // the operator cabled eth1 by hand: its port_id stays, the rest comes from LLDP
    const eth1 = await api(`${url}/v1/ports`, {
      method: "POST",
      headers: { "X-OpenStack-Ironic-API-Version": "1.19" },
      body: { node_uuid: uuid, address: MACS[1], local_link_connection: { port_id: "by-hand" } },
    });
    expect(eth1.status, JSON.stringify(eth1.body)).toBe(201);

    const machine = join(dir, "machine.json");
    const collectorData = {
      lldp_raw: { eth0: frame(1), eth1: frame(2), eth2: [] },
      pci_devices: [
        {
          vendor_id: "10de",
          product_id: "20b5",
          class: "030200",
          revision: "a1",
          bus: "0000:3b:00.0",
          numa_node_id: "0",
          type: "GPU",
        },
      ],
      numa_topology: {
        ram: [{ numa_node: 0, size_kb: 16318460 }],
        cpus: [],
        nics: [{ name: "eth0", numa_node: 0 }],
      },
    };
    await writeFile(
      machine,
      JSON.stringify({ inventory: sampleInventory({ macs: MACS }), collector_data: collectorData }),
    );
    const agent = startAgentProcess({
      executable,
      args: [
        "service",
        "--conductor",
        `${url.replace("http", "ws")}/v1/agent`,
        "--backend",
        "simulated",
      ].concat(["--inventory", machine]),
    });
    stops.push(() => agent.stop());

    // the inspect's 202 read: a refused inspect would leave the node manageable, the wait passing at once
    await provisionThrough(url, "ll", [
      ["manage", "manageable"],
      ["inspect", "manageable"],
    ]);
    const node = await waitForState(url, "ll", "manageable");
    expect(node.last_error).toBeNull();

    const listed = await api(`${url}/v1/ports?node=ll&fields=address,local_link_connection`, {
      headers: { "X-OpenStack-Ironic-API-Version": "1.19" },
    });
    const byMac = new Map(
      (
        listed.body as { ports: { address: string; local_link_connection: Record<string, string> }[] }
      ).ports.map((port) => [port.address, port.local_link_connection]),
    );
    expect(byMac.get(MACS[0]!)).toEqual({
      switch_id: "a0:b1:c2:d3:e4:f5",
      port_id: "xe-0/0/1",
      switch_info: "tor-a1.example",
    });
    expect(byMac.get(MACS[1]!)).toEqual({
      switch_id: "a0:b1:c2:d3:e4:f5",
      port_id: "by-hand",
      switch_info: "tor-a1.example",
    });
    expect(byMac.get(MACS[2]!)).toEqual({}); // it heard nothing

    const data = await api(`${url}/v1/nodes/ll/inventory`, {
      headers: { "X-OpenStack-Ironic-API-Version": "1.81" },
    });
    const pluginData = (data.body as { plugin_data: Record<string, unknown> }).plugin_data;
    expect(pluginData.lldp_raw).toEqual(collectorData.lldp_raw);
    expect(pluginData.pci_devices).toEqual(collectorData.pci_devices);
    expect(pluginData.numa_topology).toEqual(collectorData.numa_topology);
    expect(pluginData.parsed_lldp).toEqual({
      eth0: {
        switch_chassis_id: "a0:b1:c2:d3:e4:f5",
        switch_port_id: "xe-0/0/1",
        switch_port_description: "server port 1",
        switch_system_name: "tor-a1.example",
        switch_port_vlans: [{ id: 100, name: "prov" }],
        switch_port_mtu: 9000,
      },
      eth1: expect.objectContaining({ switch_port_id: "xe-0/0/2" }),
    });
    // a conductor start (30 s at most), an agent build and two waits: room for waitForState's 60 s
  }, 180_000);
});
