import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../scripts/lab/lab.ts";
import { probeLabNode, type LabNodeProbe } from "../../scripts/lab/probe.ts";
import { readLabState } from "../../scripts/lab/state.ts";
import {
  cloudDown,
  cloudUp,
  createBaremetalFlavor,
  createImage,
  hypervisors,
  nodeAvailable,
  openstack,
  openstackJson,
  seconds,
  serverSettles,
  settle,
  token,
  type LabCloud,
} from "../helpers/cloud.ts";

/**
 * Issue 25's first path end to end on a real machine: the lab cloud (Keystone, Glance, Placement, Nova with
 * nova-compute-ironic) in front of Anvil, and one QEMU lab node behind ipmi_sim that PXE-boots the real
 * agent ramdisk from that Anvil. A user with Keystone credentials creates a server from a Glance image with
 * a config drive; the agent writes the image it fetched from Anvil's image cache; the VM boots it and
 * prints what the config drive holds.
 */

const BOOTED = "ANVIL-TEST-IMAGE-BOOTED anvil-test";
const TEST_IMAGE = join(REPO_ROOT, "build", "test-images", "anvil-test.qcow2");

let lab: LabCloud | undefined;
let probe: LabNodeProbe | undefined;
let labNodeName = "";
const figures: Record<string, string> = {};

const the = (): LabCloud => {
  if (lab === undefined) throw new Error("the cloud is not up");
  return lab;
};

/** How many times the VM has booted the test image, by its console. */
async function imageBoots(): Promise<number> {
  return ((await probe?.serial()) ?? "").split(BOOTED).length - 1;
}

/** Waits until the VM boots the test image once more than `before` times; resolves with that boot's lines. */
async function nextImageBoot(before: number): Promise<string> {
  const text = await settle(
    "the VM to boot the written image",
    async () => ((await imageBoots()) > before ? await probe?.serial() : undefined),
    5 * 60_000,
  );
  return text
    .split(BOOTED)
    .slice(before + 1)
    .join(BOOTED);
}

/** The console's lines from the last image boot up to its power-off, once it printed the config drive. */
async function configDriveLines(before: number): Promise<string> {
  return settle(
    "the image to read its config drive",
    async () => {
      const boot = await nextImageBoot(before);
      return /ANVIL-TEST-IMAGE-CONFIGDRIVE/.test(boot) ? boot : undefined;
    },
    5 * 60_000,
  );
}

const reuse = process.env.ANVIL_CLOUD_E2E_DIR;

beforeAll(async () => {
  const t0 = Date.now();
  const up = await cloudUp(["--computes", "1", "--lab-nodes", "1"], reuse);
  lab = up.cloud;
  const state = await readLabState(lab.cloudEnv.LAB_DIR ?? "");
  const labNode = state?.nodes[0];
  if (labNode === undefined) throw new Error(`no lab node in ${lab.cloudEnv.LAB_DIR}`);
  labNodeName = labNode.name;
  probe = probeLabNode(labNode);
  if (reuse) return;
  figures["cloud up (1 compute, 1 QEMU node)"] = seconds(Date.now() - t0);
  figures["cloud up (script's line)"] = /up in .*/.exec(up.log)?.[0] ?? "?";
}, 25 * 60_000);

afterAll(async () => {
  console.log(
    [
      "\nlab cloud + QEMU node figures",
      ...Object.entries(figures).map(([k, v]) => `  ${k.padEnd(40)} ${v}`),
    ].join("\n"),
  );
  if (lab) await cloudDown(lab);
}, 5 * 60_000);

describe("openstack server create on a QEMU lab node deployed by the real agent", () => {
  it("create with a config drive, reboot, stop, start, rebuild, delete; every call with a Keystone token", async () => {
    const cloud = the();
    const enrollFile = join(cloud.cloudEnv.LAB_DIR ?? "", "enroll.json");

    // Enroll the lab's node (ipmi driver, its BMC's password from the 0600 enroll file, never argv) and its
    // port, as Nova needs it: the node's resource class and properties.
    const t0 = Date.now();
    await openstack(cloud, ["baremetal", "create", enrollFile]);
    await openstack(cloud, [
      "baremetal", "node", "set", labNodeName, "--resource-class", "baremetal",
      "--property", "cpu_arch=x86_64", "--property", "cpus=1", "--property", "memory_mb=768",
      "--property", "local_gb=4",
    ]); // prettier-ignore
    await openstack(cloud, ["baremetal", "node", "manage", labNodeName, "--wait", "300"]);
    const t1 = Date.now();
    // provide: automated cleaning, the ramdisk's first PXE boot
    await openstack(cloud, ["baremetal", "node", "provide", labNodeName, "--wait", "600"]);
    figures["provide (clean by the agent)"] = seconds(Date.now() - t1);
    figures["enroll → available"] = seconds(Date.now() - t0);
    const nodeId = (await openstackJson<{ uuid: string }>(cloud, ["baremetal", "node", "show", labNodeName]))
      .uuid;

    const tok = await token(cloud);
    await settle(
      "Nova's resource tracker reports the node",
      async () => {
        const hs = await hypervisors(cloud, tok);
        return hs.some((h) => h.hypervisor_hostname === nodeId && h.state === "up") ? hs : undefined;
      },
      5 * 60_000,
    );

    const imageId = await createImage(cloud, TEST_IMAGE, "anvil-test");
    await createBaremetalFlavor(cloud, "bm");

    // The user data's first line carries a fresh nonce: the VM can only print it from this server's drive.
    const nonce = randomBytes(6).toString("hex");
    const work = await mkdtemp(join(tmpdir(), "anvil-cloud-agent-"));
    const userData = join(work, "user-data");
    await writeFile(userData, `anvil-user-data ${nonce}\nsecond line\n`);
    let id = "";
    const bootsBefore = await imageBoots();
    try {
      const t2 = Date.now();
      const created = await openstackJson<{ id: string; status: string }>(cloud, [
        "server", "create", "--flavor", "bm", "--image", "anvil-test", "--config-drive", "true",
        "--user-data", userData, "--network", "lab-net", "--wait", "s1",
      ]); // prettier-ignore
      figures["server create → ACTIVE"] = seconds(Date.now() - t2);
      expect(created.status).toBe("ACTIVE");
      id = created.id;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
    let n = await serverSettles(cloud, id, { status: "ACTIVE", powerState: "power on" });
    expect(n.uuid).toBe(nodeId);
    expect(n.provision_state).toBe("active");
    expect(n.instance_uuid).toBe(id);
    const shown = await openstackJson<{ instance_info: Record<string, unknown> }>(cloud, [
      "baremetal", "node", "show", nodeId, "--fields", "instance_info",
    ]); // prettier-ignore
    expect(shown.instance_info.image_source).toBe(imageId);
    expect(shown.instance_info.configdrive).toBe("******");

    // The agent wrote the Glance image (through Anvil's cache) and the config drive; the VM booted the disk.
    const first = await configDriveLines(bootsBefore);
    expect(first).toMatch(new RegExp(`ANVIL-TEST-IMAGE-CONFIGDRIVE \\S+ uuid=${id}`));
    expect(first).toContain(`ANVIL-TEST-IMAGE-USERDATA anvil-user-data ${nonce}`);
    // It came from the conductor's cache of Glance images: one file there, the image's bytes.
    const cacheDir = join(cloud.dir, "anvil", "image-cache");
    const cached = await Promise.all((await readdir(cacheDir)).map((f) => stat(join(cacheDir, f))));
    expect(cached.filter((c) => c.isFile()).map((c) => c.size)).toContain((await stat(TEST_IMAGE)).size);

    // reboot: a power cycle into the disk again (the image had powered itself off after its marker)
    let boots = await imageBoots();
    let t = Date.now();
    await openstack(cloud, ["server", "reboot", "--wait", id]);
    n = await serverSettles(cloud, id, { status: "ACTIVE", powerState: "power on" });
    expect(await configDriveLines(boots)).toMatch(new RegExp(`uuid=${id}`));
    figures["server reboot → image booted again"] = seconds(Date.now() - t);

    t = Date.now();
    await openstack(cloud, ["server", "stop", id]);
    n = await serverSettles(cloud, id, { status: "SHUTOFF", powerState: "power off" });
    figures["server stop → SHUTOFF"] = seconds(Date.now() - t);

    boots = await imageBoots();
    t = Date.now();
    await openstack(cloud, ["server", "start", id]);
    n = await serverSettles(cloud, id, { status: "ACTIVE", powerState: "power on" });
    expect(await configDriveLines(boots)).toMatch(new RegExp(`uuid=${id}`));
    figures["server start → image booted"] = seconds(Date.now() - t);

    // rebuild: the agent writes the image again (a ramdisk boot, then the disk)
    boots = await imageBoots();
    t = Date.now();
    await openstack(cloud, ["server", "rebuild", "--image", "anvil-test", "--wait", id]);
    figures["server rebuild → ACTIVE"] = seconds(Date.now() - t);
    n = await serverSettles(cloud, id, { status: "ACTIVE", powerState: "power on" });
    expect(n.provision_state).toBe("active");
    expect(await configDriveLines(boots)).toMatch(new RegExp(`uuid=${id}`));
    figures["server rebuild → image booted"] = seconds(Date.now() - t);

    t = Date.now();
    await openstack(cloud, ["server", "delete", "--wait", id]);
    n = await nodeAvailable(cloud, nodeId);
    figures["server delete → node cleaned, available"] = seconds(Date.now() - t);
    expect(n.power_state).toBe("power off");

    // Every change to the node came from a Keystone user: the admin (the CLI) or Nova's `ironic` user.
    const history = await openstackJson<Record<string, unknown>[]>(cloud, [
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
