import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../scripts/lab/lab.ts";
import { probeLabNode } from "../../scripts/lab/probe.ts";
import { readLabState } from "../../scripts/lab/state.ts";
import {
  api,
  cloudDown,
  cloudScript,
  cloudUp,
  computesDiagnosis,
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
import { imageBoots, type ImageBoots } from "../helpers/image-boots.ts";

/**
 * Issue 25's lab cloud: Debian's Keystone, Glance, Placement and Nova (Zed) with two nova-compute-ironic
 * services in front of an Anvil conductor, all started by scripts/cloud/cloud.sh, and one QEMU lab node
 * behind ipmi_sim. Everything a user does goes through the stock `openstack` CLI with Keystone credentials.
 *
 * One cloud for every case (its start takes minutes): four fake-hardware nodes of resource class
 * `baremetal` (flavor bm) are split between the computes; the QEMU node, of class `lab` (flavor bm-lab),
 * walks a server's whole life: the real agent ramdisk PXE-booted from Anvil writes a Glance image and a
 * config drive the VM then boots and prints; last, a compute stops, the other takes every node, and a
 * server still lands on a fake node.
 */

const NODES = 4;
const COMPUTES = 2;
const TEST_IMAGE = join(REPO_ROOT, "build", "test-images", "anvil-test.qcow2");

let lab: LabCloud | undefined;
let boots: ImageBoots | undefined;
let labNodeName = "";
/** Every node enrolled so far, fake and QEMU: all of them are Nova hypervisors. */
const enrolled: string[] = [];
const figures: Record<string, string> = {};

const the = (): LabCloud => {
  if (lab === undefined) throw new Error("the cloud is not up");
  return lab;
};
const theBoots = (): ImageBoots => {
  if (boots === undefined) throw new Error("no lab node");
  return boots;
};
const openstack = (args: string[]): Promise<string> => openstackOf(the(), args);
const openstackJson = <T>(args: string[]): Promise<T> => openstackJsonOf<T>(the(), args);
const token = (): Promise<string> => tokenOf(the());
const hypervisors = (tok: string): Promise<Hypervisor[]> => hypervisorsOf(the(), tok);
const server = (id: string): Promise<Record<string, string>> => serverOf(the(), id);
const serverSettles = (id: string, status: string, powerState: string): Promise<BaremetalNode> =>
  serverSettlesOf(the(), id, { status, powerState });
const nodeAvailable = (id: string): Promise<BaremetalNode> => nodeAvailableOf(the(), id);

/**
 * The i-th fake node's uuid. Nova's hash ring (tooz, 2^5 partitions over compute-1 and compute-2) places
 * random uuids on one compute alone for 1 run in 8 with 4 nodes, and the split below then never comes: these
 * are placed 1 on compute-2 and 3 on compute-1 (checked with tooz's HashRing as Nova builds it).
 */
const splitUuid = (i: number): string => `c1a0d000-0000-4000-8000-${String(i).padStart(12, "0")}`;

// NOTE: ANVIL_CLOUD_E2E_DIR names a cloud already up (`cloud.sh up --computes 2 --lab-nodes 1`, no servers
// or enrolled nodes yet) that the test uses and leaves up: this is for working on the test.
const reuse = process.env.ANVIL_CLOUD_E2E_DIR;

beforeAll(async () => {
  const t0 = Date.now();
  const up = await cloudUp(["--computes", String(COMPUTES), "--lab-nodes", "1"], reuse);
  lab = up.cloud;
  const state = await readLabState(lab.cloudEnv.LAB_DIR ?? "");
  const labNode = state?.nodes[0];
  if (labNode === undefined) throw new Error(`no lab node in ${lab.cloudEnv.LAB_DIR}`);
  labNodeName = labNode.name;
  boots = imageBoots(probeLabNode(labNode));
  if (reuse) return;
  figures["cloud up (2 computes, 1 QEMU node)"] = seconds(Date.now() - t0);
  figures["cloud up (script's line)"] = /up in .*/.exec(up.log)?.[0] ?? "?";
}, 25 * 60_000);

afterAll(async () => {
  console.log(
    ["\nlab cloud figures", ...Object.entries(figures).map(([k, v]) => `  ${k.padEnd(40)} ${v}`)].join("\n"),
  );
  if (lab) await cloudDown(lab);
}, 5 * 60_000);

describe("the lab cloud on Anvil", () => {
  it("reports enrolled nodes to Nova and Placement, split between the computes", async () => {
    // compute-2 joins a running cloud: stopped before the nodes come, it takes its share by Nova's rebalance,
    // which moves node records compute-1 made and the scheduler mapped. NOTE: its host was then never mapped to
    // the cell and Nova hid its nodes (2 CI runs where it came up late); cloud.sh maps hosts by service now,
    // and this order makes that case every run's.
    await cloudScript(the().dir, ["stop-compute", "2"], 2 * 60_000);
    const t0 = Date.now();
    for (let i = 1; i <= NODES; i++) {
      const created = await openstackJson<{ uuid: string }>([
        "baremetal", "node", "create", "--driver", "fake-hardware", "--resource-class", "baremetal",
        "--name", `cloud-${i}`, "--uuid", splitUuid(i), "--property", "cpu_arch=x86_64", "--property", "cpus=1",
        "--property", "memory_mb=768", "--property", "local_gb=4",
      ]); // prettier-ignore
      enrolled.push(created.uuid);
      // A port with the NIC's MAC: Nova attaches the server's Neutron port (a VIF) to one.
      const mac = `52:54:00:c1:00:${String(i).padStart(2, "0")}`;
      await openstack(["baremetal", "port", "create", mac, "--node", created.uuid]);
    }
    await Promise.all(enrolled.map((id) => openstack(["baremetal", "node", "manage", id, "--wait", "120"])));
    await Promise.all(enrolled.map((id) => openstack(["baremetal", "node", "provide", id, "--wait", "120"])));
    // fake-hardware has no power state until a power action (Ironic's), and Nova's resource tracker offers no
    // resources for a node whose power_state is None: devstack powers its fake nodes off, so does this lab
    await Promise.all(enrolled.map((id) => openstack(["baremetal", "node", "power", "off", id])));
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
    expect(seen.map((h) => h.hypervisor_hostname).sort()).toEqual([...enrolled].sort());
    expect(new Set(seen.map((h) => h.service.host))).toEqual(new Set(["compute-1"]));

    // Nova's hash ring over the two live compute services gives each a share. A compute enters the other's
    // ring only once it has a node of its own, so compute-1 may keep every node for a cycle or two
    // (update_resources_interval) before handing some over: wait for the split, don't expect it at once.
    const t2 = Date.now();
    // cloud.sh waits up to 120 s for the compute to report, then maps it: more room than that here
    await cloudScript(the().dir, ["start-compute", "2"], 4 * 60_000);
    const split = await settle(
      "both computes to report a share of the nodes",
      async () => {
        const hosts = new Set((await hypervisors(tok)).map((h) => h.service.host));
        return hosts.size === 2 ? [...hosts].sort() : undefined;
      },
      // 10.6 s on a quiet machine, 51.4 s in a loaded CI run
      5 * 60_000,
    ).catch(async (error: unknown) => {
      throw new Error(`${String(error)}\n${await computesDiagnosis(the())}`);
    });
    figures["compute-2 joins, takes its share"] = seconds(Date.now() - t2);
    expect(split).toEqual(["compute-1", "compute-2"]);

    // Placement: one provider per node, its inventory one CUSTOM_BAREMETAL (the node's resource class).
    for (const id of enrolled) {
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
});

describe("openstack server create on a QEMU lab node deployed by the real agent", () => {
  it("create with a config drive, reboot, stop, start, rebuild, delete; every call with a Keystone token", async () => {
    const cloud = the();
    const enrollFile = join(cloud.cloudEnv.LAB_DIR ?? "", "enroll.json");

    // Enroll the lab's node (ipmi driver, its BMC's password from the 0600 enroll file, never argv) and its
    // port, as Nova needs it: the node's resource class and properties.
    const t0 = Date.now();
    await openstack(["baremetal", "create", enrollFile]);
    await openstack([
      "baremetal", "node", "set", labNodeName, "--resource-class", "lab",
      "--property", "cpu_arch=x86_64", "--property", "cpus=1", "--property", "memory_mb=768",
      "--property", "local_gb=4",
    ]); // prettier-ignore
    await openstack(["baremetal", "node", "manage", labNodeName, "--wait", "300"]);
    const t1 = Date.now();
    // provide: automated cleaning, the ramdisk's first PXE boot
    await openstack(["baremetal", "node", "provide", labNodeName, "--wait", "600"]);
    figures["provide (clean by the agent)"] = seconds(Date.now() - t1);
    figures["enroll → available"] = seconds(Date.now() - t0);
    const nodeId = (await openstackJson<{ uuid: string }>(["baremetal", "node", "show", labNodeName])).uuid;
    enrolled.push(nodeId);

    const tok = await token();
    await settle(
      "Nova's resource tracker reports the node",
      async () => {
        const hs = await hypervisors(tok);
        return hs.some((h) => h.hypervisor_hostname === nodeId && h.state === "up") ? hs : undefined;
      },
      5 * 60_000,
    );

    const imageId = await createImage(cloud, TEST_IMAGE, "anvil-test");
    await createBaremetalFlavor(cloud, "bm-lab", "lab");

    // The user data's first line carries a fresh nonce: the VM can only print it from this server's drive.
    const nonce = randomBytes(6).toString("hex");
    const work = await mkdtemp(join(tmpdir(), "anvil-cloud-agent-"));
    const userData = join(work, "user-data");
    await writeFile(userData, `anvil-user-data ${nonce}\nsecond line\n`);
    let id = "";
    const bootsBefore = await theBoots().count();
    try {
      const t2 = Date.now();
      const created = await openstackJson<{ id: string; status: string }>([
        "server", "create", "--flavor", "bm-lab", "--image", "anvil-test", "--config-drive", "true",
        "--user-data", userData, "--network", "lab-net", "--wait", "s1",
      ]); // prettier-ignore
      figures["server create → ACTIVE"] = seconds(Date.now() - t2);
      expect(created.status).toBe("ACTIVE");
      id = created.id;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
    let n = await serverSettles(id, "ACTIVE", "power on");
    expect(n.uuid).toBe(nodeId);
    expect(n.provision_state).toBe("active");
    expect(n.instance_uuid).toBe(id);
    const shown = await openstackJson<{ instance_info: Record<string, unknown> }>([
      "baremetal", "node", "show", nodeId, "--fields", "instance_info",
    ]); // prettier-ignore
    expect(shown.instance_info.image_source).toBe(imageId);
    expect(shown.instance_info.configdrive).toBe("******");
    expect((await server(id)).config_drive).toBe("True");
    // The server's Neutron port is the VIF on the node.
    const ports = await openstackJson<{ ID: string }[]>(["port", "list", "--server", id]);
    expect(ports).toHaveLength(1);
    const vifs = await openstackJson<{ ID: string }[]>(["baremetal", "node", "vif", "list", nodeId]);
    expect(vifs.map((v) => v.ID)).toEqual([ports[0]?.ID]);

    // The agent wrote the Glance image (through Anvil's cache) and the config drive; the VM booted the disk.
    const first = await theBoots().configDriveLines(bootsBefore);
    expect(first).toMatch(new RegExp(`ANVIL-TEST-IMAGE-CONFIGDRIVE \\S+ uuid=${id}`));
    expect(first).toContain(`ANVIL-TEST-IMAGE-USERDATA anvil-user-data ${nonce}`);
    // It came from the conductor's cache of Glance images: one file there, the image's bytes.
    const cacheDir = join(cloud.dir, "anvil", "image-cache");
    const cached = await Promise.all((await readdir(cacheDir)).map((f) => stat(join(cacheDir, f))));
    expect(cached.filter((c) => c.isFile()).map((c) => c.size)).toContain((await stat(TEST_IMAGE)).size);

    // reboot: a power cycle into the disk again (the image had powered itself off after its marker)
    let before = await theBoots().count();
    let t = Date.now();
    await openstack(["server", "reboot", "--wait", id]);
    n = await serverSettles(id, "ACTIVE", "power on");
    expect(await theBoots().configDriveLines(before)).toMatch(new RegExp(`uuid=${id}`));
    figures["server reboot → image booted again"] = seconds(Date.now() - t);

    t = Date.now();
    await openstack(["server", "stop", id]);
    n = await serverSettles(id, "SHUTOFF", "power off");
    figures["server stop → SHUTOFF"] = seconds(Date.now() - t);

    before = await theBoots().count();
    t = Date.now();
    await openstack(["server", "start", id]);
    n = await serverSettles(id, "ACTIVE", "power on");
    expect(await theBoots().configDriveLines(before)).toMatch(new RegExp(`uuid=${id}`));
    figures["server start → image booted"] = seconds(Date.now() - t);

    // rebuild: the agent writes the image again (a ramdisk boot, then the disk)
    before = await theBoots().count();
    t = Date.now();
    await openstack(["server", "rebuild", "--image", "anvil-test", "--wait", id]);
    figures["server rebuild → ACTIVE"] = seconds(Date.now() - t);
    n = await serverSettles(id, "ACTIVE", "power on");
    expect(n.provision_state).toBe("active");
    expect(await theBoots().configDriveLines(before)).toMatch(new RegExp(`uuid=${id}`));
    figures["server rebuild → image booted"] = seconds(Date.now() - t);

    t = Date.now();
    await openstack(["server", "delete", "--wait", id]);
    n = await nodeAvailable(nodeId);
    figures["server delete → node cleaned, available"] = seconds(Date.now() - t);
    expect(n.power_state).toBe("power off");
    expect(await openstackJson<unknown[]>(["baremetal", "node", "vif", "list", nodeId])).toEqual([]);
    expect(await openstackJson<unknown[]>(["port", "list"])).toEqual([]);

    // Every change to the node came from a Keystone user: the admin (the CLI) or Nova's `ironic` user.
    const history = await openstackJson<Record<string, unknown>[]>([
      "baremetal", "node", "history", "list", nodeId, "--long",
    ]); // prettier-ignore
    const users = history.map((e) => e.User ?? e.user).filter((u) => u !== null && u !== undefined);
    expect(users.length).toBeGreaterThan(0);
    expect(new Set(users)).toEqual(new Set(["admin", "ironic"]));
    // The conductor ran with auth_strategy keystone and refused nothing for want of a token…
    const log = await readFile(join(cloud.dir, "log", "anvil.log"), "utf8");
    expect(log).toMatch(/"auth_strategy":"keystone"/);
    expect(log).not.toMatch(/"auth_strategy":"noauth"/);
    expect(log.split("\n").filter((l) => /"status":401/.test(l))).toEqual([]);
    // …and a call without one is refused (noauth is not on).
    const bare = await fetch(`${cloud.cloudEnv.ANVIL_URL}/v1/nodes`, {
      headers: { "X-OpenStack-Ironic-API-Version": "1.78" },
    });
    expect(bare.status).toBe(401);
  });
});

describe("a stopped compute", () => {
  it("moves a stopped compute's nodes to the survivor, and new servers still land", async () => {
    const tok = await token();
    const before = await hypervisors(tok);
    const moving = before.filter((h) => h.service.host === "compute-2").map((h) => h.hypervisor_hostname);
    if (moving.length === 0) expect.fail(`compute-2 has no node\n${await computesDiagnosis(the())}`);

    const t0 = Date.now();
    await cloudScript(the().dir, ["stop-compute", "2"], 2 * 60_000);
    const after = await settle(
      "compute-1 reports every node",
      async () => {
        const hs = await hypervisors(tok);
        return hs.length === enrolled.length && hs.every((h) => h.service.host === "compute-1")
          ? hs
          : undefined;
      },
      5 * 60_000,
    );
    figures["takeover by compute-1"] = seconds(Date.now() - t0);
    expect(after.map((h) => h.hypervisor_hostname).sort()).toEqual([...enrolled].sort());

    await createBaremetalFlavor(the(), "bm");
    const t1 = Date.now();
    // fake-hardware writes no image: the QEMU case's Glance image serves
    const created = await openstackJson<{ id: string; status: string }>([
      "server", "create", "--flavor", "bm", "--image", "anvil-test", "--nic", "none", "--wait", "s2",
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
