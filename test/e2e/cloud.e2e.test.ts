import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import {
  api,
  cloudDown,
  cloudScript,
  cloudUp,
  createBaremetalFlavor,
  createImage,
  hypervisors as hypervisorsOf,
  nodeAvailable as nodeAvailableOf,
  openstack as openstackOf,
  openstackJson as openstackJsonOf,
  seconds,
  server as serverOf,
  serverSettles as serverSettlesOf,
  settle,
  token as tokenOf,
  type BaremetalNode,
  type Hypervisor,
  type LabCloud,
} from "../helpers/cloud.ts";

/**
 * Issue 25's lab cloud: Debian's Keystone, Glance, Placement and Nova (Zed) with two nova-compute-ironic
 * services in front of an Anvil conductor, all started by scripts/cloud/cloud.sh. Everything a user does
 * goes through the stock `openstack` CLI with Keystone credentials; the nodes are fake-hardware.
 */

const NODES = 4;
const COMPUTES = 2;

let lab: LabCloud | undefined;
const figures: Record<string, string> = {};

const the = (): LabCloud => {
  if (lab === undefined) throw new Error("the cloud is not up");
  return lab;
};
const openstack = (args: string[]): Promise<string> => openstackOf(the(), args);
const openstackJson = <T>(args: string[]): Promise<T> => openstackJsonOf<T>(the(), args);
const token = (): Promise<string> => tokenOf(the());
const hypervisors = (tok: string): Promise<Hypervisor[]> => hypervisorsOf(the(), tok);
const server = (id: string): Promise<Record<string, string>> => serverOf(the(), id);
const serverSettles = (id: string, status: string, powerState: string): Promise<BaremetalNode> =>
  serverSettlesOf(the(), id, { status, powerState });
const nodeAvailable = (id: string): Promise<BaremetalNode> => nodeAvailableOf(the(), id);

// NOTE: ANVIL_CLOUD_E2E_DIR names a cloud already up (`cloud.sh up --computes 2`, no servers or nodes yet)
// that the test uses and leaves up: a cloud's start takes minutes, so this is for working on the test.
const reuse = process.env.ANVIL_CLOUD_E2E_DIR;

beforeAll(async () => {
  const t0 = Date.now();
  const up = await cloudUp(["--computes", String(COMPUTES)], reuse);
  lab = up.cloud;
  if (reuse) return;
  figures["cloud up"] = seconds(Date.now() - t0);
  figures["cloud up (script's line)"] = /up in .*/.exec(up.log)?.[0] ?? "?";
}, 25 * 60_000);

afterAll(async () => {
  console.log(
    ["\nlab cloud figures", ...Object.entries(figures).map(([k, v]) => `  ${k.padEnd(28)} ${v}`)].join("\n"),
  );
  if (lab) await cloudDown(lab);
}, 5 * 60_000);

describe("the lab cloud on Anvil", () => {
  const nodeIds: string[] = [];

  it("reports enrolled nodes to Nova and Placement, split between the computes", async () => {
    const t0 = Date.now();
    for (let i = 1; i <= NODES; i++) {
      const created = await openstackJson<{ uuid: string }>([
        "baremetal", "node", "create", "--driver", "fake-hardware", "--resource-class", "baremetal",
        "--name", `cloud-${i}`, "--property", "cpu_arch=x86_64", "--property", "cpus=1",
        "--property", "memory_mb=768", "--property", "local_gb=4",
      ]); // prettier-ignore
      nodeIds.push(created.uuid);
      // A port with the NIC's MAC: Nova attaches the server's Neutron port (a VIF) to one.
      const mac = `52:54:00:c1:00:${String(i).padStart(2, "0")}`;
      await openstack(["baremetal", "port", "create", mac, "--node", created.uuid]);
    }
    await Promise.all(nodeIds.map((id) => openstack(["baremetal", "node", "manage", id, "--wait", "120"])));
    await Promise.all(nodeIds.map((id) => openstack(["baremetal", "node", "provide", id, "--wait", "120"])));
    figures["enroll 4 nodes"] = seconds(Date.now() - t0);

    const tok = await token();
    const t1 = Date.now();
    const seen = await settle(
      "Nova's resource tracker reports every node",
      async () => {
        const hs = await hypervisors(tok);
        return hs.length === NODES && hs.every((h) => h.state === "up") ? hs : undefined;
      },
      5 * 60_000,
    );
    figures["nodes seen by Nova"] = seconds(Date.now() - t1);
    expect(seen.map((h) => h.hypervisor_hostname).sort()).toEqual([...nodeIds].sort());
    // Nova's hash ring over the two live compute services gives each a share. A compute enters the other's
    // ring only once it has a node of its own, so the first to list may take every node for a cycle or two
    // (update_resources_interval) before handing some over: wait for the split, don't expect it at once.
    const split = await settle(
      "both computes to report a share of the nodes",
      async () => {
        const hosts = new Set((await hypervisors(tok)).map((h) => h.service.host));
        return hosts.size === 2 ? [...hosts].sort() : undefined;
      },
      3 * 60_000,
    );
    expect(split).toEqual(["compute-1", "compute-2"]);

    // Placement: one provider per node, its inventory one CUSTOM_BAREMETAL (the node's resource class).
    for (const id of nodeIds) {
      const inv = await settle(
        `placement inventory of ${id}`,
        async () => {
          const url = `http://127.0.0.1:${the().cloudEnv.PLACEMENT_PORT}/resource_providers/${id}/inventories`;
          const body = await api<{ inventories: Record<string, { total: number }> }>(url, tok);
          return body.inventories.CUSTOM_BAREMETAL ? body.inventories : undefined;
        },
        2 * 60_000,
      );
      expect(Object.keys(inv)).toEqual(["CUSTOM_BAREMETAL"]);
      expect(inv.CUSTOM_BAREMETAL?.total).toBe(1);
    }
  });

  it("walks a server with a config drive through create, reboot, stop, start, rebuild and delete", async () => {
    let imageId = "";
    const work = await mkdtemp(join(tmpdir(), "anvil-cloud-image-"));
    try {
      // A real (empty) qcow2: fake-hardware does not write it, but Glance and Nova read its metadata.
      const image = join(work, "cloud-test.qcow2");
      expect((await exec("qemu-img", ["create", "-f", "qcow2", image, "64M"])).code).toBe(0);
      imageId = await createImage(the(), image, "cloud-test");
    } finally {
      await rm(work, { recursive: true, force: true });
    }
    await createBaremetalFlavor(the(), "bm");

    const t0 = Date.now();
    const created = await openstackJson<{ id: string; status: string }>([
      "server", "create", "--flavor", "bm", "--image", "cloud-test", "--config-drive", "true",
      "--network", "lab-net", "--wait", "s1",
    ]); // prettier-ignore
    figures["server create → ACTIVE"] = seconds(Date.now() - t0);
    expect(created.status).toBe("ACTIVE");
    const id = created.id;
    let n = await serverSettles(id, "ACTIVE", "power on");
    expect(n.provision_state).toBe("active");
    expect(n.instance_uuid).toBe(id);
    const nodeId = n.uuid;
    // Nova built a config drive and handed it to Anvil (which masks it, as Ironic does).
    const shown = await openstackJson<{ instance_info: Record<string, unknown> }>([
      "baremetal", "node", "show", nodeId, "--fields", "instance_info",
    ]); // prettier-ignore
    expect(shown.instance_info.configdrive).toBe("******");
    expect(shown.instance_info.image_source).toBe(imageId);
    expect((await server(id)).config_drive).toBe("True");
    // The server's Neutron port is the VIF on the node.
    const ports = await openstackJson<{ ID: string }[]>(["port", "list", "--server", id]);
    expect(ports).toHaveLength(1);
    const vifs = await openstackJson<{ ID: string }[]>(["baremetal", "node", "vif", "list", nodeId]);
    expect(vifs.map((v) => v.ID)).toEqual([ports[0]?.ID]);

    await openstack(["server", "reboot", "--wait", id]);
    n = await serverSettles(id, "ACTIVE", "power on");
    expect(n.uuid).toBe(nodeId);

    await openstack(["server", "stop", id]);
    n = await serverSettles(id, "SHUTOFF", "power off");
    expect(n.uuid).toBe(nodeId);

    await openstack(["server", "start", id]);
    n = await serverSettles(id, "ACTIVE", "power on");

    const t1 = Date.now();
    await openstack(["server", "rebuild", "--image", "cloud-test", "--wait", id]);
    figures["server rebuild → ACTIVE"] = seconds(Date.now() - t1);
    n = await serverSettles(id, "ACTIVE", "power on");
    expect(n.uuid).toBe(nodeId);
    expect(n.provision_state).toBe("active");

    const t2 = Date.now();
    await openstack(["server", "delete", "--wait", id]);
    n = await nodeAvailable(nodeId);
    figures["server delete → node available"] = seconds(Date.now() - t2);
    expect(n.power_state).toBe("power off");
    expect(await openstackJson<unknown[]>(["baremetal", "node", "vif", "list", nodeId])).toEqual([]);
    expect(await openstackJson<unknown[]>(["port", "list"])).toEqual([]);
  });

  it("moves a stopped compute's nodes to the survivor, and new servers still land", async () => {
    const tok = await token();
    const before = await hypervisors(tok);
    const moving = before.filter((h) => h.service.host === "compute-2").map((h) => h.hypervisor_hostname);
    expect(moving.length).toBeGreaterThan(0);

    const t0 = Date.now();
    await cloudScript(the().dir, ["stop-compute", "2"], 2 * 60_000);
    const after = await settle(
      "compute-1 reports every node",
      async () => {
        const hs = await hypervisors(tok);
        return hs.length === NODES && hs.every((h) => h.service.host === "compute-1") ? hs : undefined;
      },
      5 * 60_000,
    );
    figures["takeover by compute-1"] = seconds(Date.now() - t0);
    expect(after.map((h) => h.hypervisor_hostname).sort()).toEqual([...nodeIds].sort());

    const t1 = Date.now();
    const created = await openstackJson<{ id: string; status: string }>([
      "server", "create", "--flavor", "bm", "--image", "cloud-test", "--nic", "none", "--wait", "s2",
    ]); // prettier-ignore
    figures["server create after takeover"] = seconds(Date.now() - t1);
    expect(created.status).toBe("ACTIVE");
    const s = await server(created.id);
    expect(s["OS-EXT-SRV-ATTR:host"]).toBe("compute-1");
    const n = await serverSettles(created.id, "ACTIVE", "power on");
    expect(n.instance_uuid).toBe(created.id);
    await openstack(["server", "delete", "--wait", created.id]);
    await nodeAvailable(n.uuid);
  });
});
