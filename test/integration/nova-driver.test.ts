import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeManagement } from "../../conductor/drivers/management/fake.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import { startConductor } from "../helpers/conductor.ts";
import { readConfigDrive, type ConfigDriveFiles } from "../helpers/config-drive.ts";

const run = promisify(execFile);

/** Every step the harness prints, in its order. A step added there and not here fails the first test. */
const STEPS = [
  "enroll",
  "init_host",
  "get_available_nodes",
  "get_available_resource",
  "update_provider_tree",
  "spawn",
  "list_instances",
  "instance_exists",
  "get_info",
  "power_off",
  "power_on",
  "reboot_hard",
  "reboot_soft",
  "rebuild",
  "rescue",
  "unrescue",
  "trigger_crash_dump",
  "destroy",
  "spawn_with_network_and_configdrive",
  "attach_interface",
  "detach_interface",
  "destroy_with_network",
  "failed_spawn_cleanup",
] as const;
type Step = (typeof STEPS)[number];

/**
 * The one list of steps known to fail, each with the request Nova's driver makes that the conductor
 * refuses. Empty: every step passes. A step that starts failing goes here only with its reason.
 */
const EXPECTED_FAILURES: Partial<Record<Step, string>> = {};

/** The `key=value` words a step's PASS line carries (the harness reports the VIF it attached that way). */
function words(reason: string): Record<string, string> {
  return Object.fromEntries(
    reason
      .split(" ")
      .map((word) => word.split("="))
      .filter((pair): pair is [string, string] => pair.length === 2),
  );
}

/** Nova's Ironic virt driver (Debian's python3-nova, Zed) driving a fake-hardware conductor, step by step. */
describe("Nova's Ironic driver against the conductor", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  const results = new Map<string, { ok: boolean; reason: string }>();
  const order: string[] = [];
  let output = "";
  /** Every config drive the conductor stored, by node (what a deploy hands the agent). */
  const configDrives = new Map<string, string>();

  beforeAll(async () => {
    ctx = await startConductor({ fakeDelayMs: 0 });
    // NOTE: the API masks instance_info.configdrive, and destroy clears it: the test reads what was written.
    const store = ctx.conductor.store;
    const updateNode = store.updateNode.bind(store);
    store.updateNode = async (uuid: string, patch: Partial<NodeRecord>, options) => {
      const configdrive = patch.instance_info?.configdrive;
      if (typeof configdrive === "string") configDrives.set(uuid, configdrive);
      return updateNode(uuid, patch, options);
    };
    // The script exits 1 when a step fails; its STEP lines are the result either way.
    const { stdout, stderr } = await run(
      "/usr/bin/python3",
      ["scripts/clients/nova_driver.py", "--endpoint", ctx.url],
      {
        timeout: 110_000,
        maxBuffer: 16 * 1024 * 1024,
      },
    ).catch((error: { stdout?: string; stderr?: string; code?: number }) => {
      if (error.code !== 1) throw error;
      return { stdout: error.stdout ?? "", stderr: error.stderr ?? "" };
    });
    output = stdout + stderr;
    for (const line of stdout.split("\n")) {
      const match = /^STEP (\S+) (PASS|FAIL) ?(.*)$/.exec(line);
      if (!match) continue;
      const [, name = "", verdict, reason = ""] = match;
      results.set(name, { ok: verdict === "PASS", reason });
      order.push(name);
    }
  }, 120_000);
  afterAll(async () => {
    await ctx?.stop();
  });

  it("reports every step once, in order", () => {
    expect(order, output).toEqual([...STEPS]);
  });

  const nodeUuids = (): { plain: string; net: string; fail: string } => {
    const [plain = "", net = "", fail = ""] = (results.get("enroll")?.reason ?? "").split(",");
    return { plain, net, fail };
  };

  describe("what each step left on Anvil's side", () => {
    let drive: ConfigDriveFiles | null = null;
    const spawned = () => words(results.get("spawn_with_network_and_configdrive")?.reason ?? "");

    beforeAll(async () => {
      const stored = configDrives.get(nodeUuids().net);
      drive = stored === undefined ? null : await readConfigDrive(stored);
    });

    it("the config drive Nova built (its own code, genisoimage) was stored as sent, a config-2 ISO", () => {
      expect(drive?.label).toBe("config-2");
      expect(drive?.meta_data?.uuid).toBeDefined();
      expect(drive?.meta_data?.name).toBe("net"); // the server's display name (Nova's metadata)
      expect(drive?.user_data).toBe("#cloud-config\n");
    });

    it("the config drive's network_data.json has the VIF Nova attached, with its MAC", () => {
      const { vif, mac } = spawned();
      expect(vif).toMatch(/^[0-9a-f-]{36}$/);
      const links = (drive?.network_data?.links ?? []) as {
        vif_id?: string;
        ethernet_mac_address?: string;
      }[];
      expect(links.map((l) => [l.vif_id, l.ethernet_mac_address])).toContainEqual([vif, mac]);
    });

    it("trigger_crash_dump sent the node one NMI (inject_nmi on its management interface)", () => {
      const management = ctx.conductor.drivers.get("fake-hardware")?.management as FakeManagement;
      expect(management.nmis.get(nodeUuids().plain)).toBe(1);
      expect(management.nmis.get(nodeUuids().net)).toBeUndefined();
    });

    it("destroy left each node available, with no instance and no VIF on any port", async () => {
      for (const uuid of Object.values(nodeUuids())) {
        const node = await ctx.conductor.store.getNode(uuid);
        expect(node?.provision_state).toBe("available");
        expect(node?.instance_uuid).toBeNull();
        expect(node?.instance_info).toEqual({});
        for (const port of await ctx.conductor.store.listPorts({ node_uuid: uuid }, {})) {
          expect(port.internal_info.tenant_vif_port_id).toBeUndefined();
        }
      }
    });
  });

  for (const step of STEPS) {
    const expectedFailure = EXPECTED_FAILURES[step];
    const test = expectedFailure ? it.fails : it;
    test(expectedFailure ? `${step} (expected to fail: ${expectedFailure})` : step, () => {
      const result = results.get(step);
      expect(result, `no STEP line for ${step}`).toBeDefined();
      expect(result?.ok, result?.reason).toBe(true);
    });
  }
});
