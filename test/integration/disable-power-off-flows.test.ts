import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureAgentBuilt, type AgentProcess } from "../helpers/agent.ts";
import { api, provisionThrough, released, startConductor, waitForState } from "../helpers/conductor.ts";
import { CountingPower, fakeHardwareWith } from "../helpers/counting-power.ts";
import { MiB, readRange, sha256 } from "../helpers/disk.ts";
import { startHttpImageServer, type HttpImageServer } from "../helpers/http-image-server.ts";
import { enrollSimulatedNode } from "../helpers/simulated-node.ts";

const V95 = { "X-OpenStack-Ironic-API-Version": "1.95" };
const POWER_OFFS = ["power off", "soft power off"];

/**
 * 1.95 `disable_power_off` through whole flows: automated cleaning, a deploy, servicing, an undeploy (teardown and
 * cleaning again) and manual cleaning with the agent executable on simulated hardware, fake-hardware power
 * counting every call that reaches the driver. A node without the flag goes through the same flows as the
 * control: its power-offs show the counting sees them.
 */
describe("disable_power_off: flows reboot where they would power off", () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-dpo-"));
  let executable = "";
  let images: HttpImageServer;
  let image: Buffer;
  const agents: AgentProcess[] = [];
  let macs = 0x20;

  beforeAll(async () => {
    executable = await ensureAgentBuilt();
    images = await startHttpImageServer();
    image = randomBytes(2 * MiB);
    await writeFile(join(dir, "disk.raw"), image);
    images.serve("/disk.raw", join(dir, "disk.raw"));
  }, 300_000);
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.stop();
  });
  afterAll(async () => {
    await images.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function lifecycle(
    disablePowerOff: boolean,
  ): Promise<{ calls: string[]; final: Record<string, unknown> }> {
    const power = new CountingPower({ delayMs: 0 });
    const ctx = await startConductor({}, { drivers: fakeHardwareWith(power) });
    try {
      const name = disablePowerOff ? "kept-on" : "control";
      const node = await enrollSimulatedNode({
        url: ctx.url,
        dir,
        name,
        mac: `52:54:00:00:95:${(macs++).toString(16).padStart(2, "0")}`,
        executable,
      });
      const flagged = await api(`${ctx.url}/v1/nodes/${name}`, {
        method: "PATCH",
        headers: V95,
        body: [{ op: "replace", path: "/disable_power_off", value: disablePowerOff }],
      });
      expect(flagged.body).toMatchObject({ disable_power_off: disablePowerOff });
      // each verb once the node is released, its 202 asserted: a refusal is named, not an unnamed wait
      const walk = (steps: Parameters<typeof provisionThrough>[2]) =>
        provisionThrough({ url: ctx.url, headers: V95 }, name, steps);
      /** Boots the ramdisk's agent, waits for `state`, then ends the agent (the node left the ramdisk). */
      const withAgent = async (state: string) => {
        const agent = node.boot();
        agents.push(agent);
        const reached = await waitForState(ctx.url, name, state);
        await agent.stop();
        return reached;
      };

      await walk([["manage", "manageable"]]);
      // automated cleaning: erase_devices_metadata in the ramdisk
      await writeFile(node.disk, Buffer.from("OLD-PARTITION-TABLE"), { flag: "r+" });
      await walk([["provide", "clean wait"]]);
      await withAgent("available");
      expect((await readRange(node.disk, 0, 19)).equals(Buffer.alloc(19))).toBe(true);

      // deploy: write_image, then boot_instance
      await released(ctx.url, name);
      const patched = await api(`${ctx.url}/v1/nodes/${name}`, {
        method: "PATCH",
        body: [
          { op: "add", path: "/instance_info/image_source", value: `${images.url}/disk.raw` },
          { op: "add", path: "/instance_info/image_os_hash_algo", value: "sha256" },
          { op: "add", path: "/instance_info/image_os_hash_value", value: sha256(image) },
        ],
      });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      await walk([["active", "wait call-back"]]);
      const active = await withAgent("active");
      expect(active.last_error).toBeNull();
      expect(active.power_state).toBe("power on");
      expect(sha256(await readRange(node.disk, 0, image.length))).toBe(sha256(image));

      // servicing (1.87) with an in-band step: into the ramdisk, then back to the instance
      await walk([
        [
          { target: "service", service_steps: [{ interface: "deploy", step: "smart_check" }] },
          "service wait",
        ],
      ]);
      const back = await withAgent("active");
      expect(back.last_error).toBeNull();
      expect(back.power_state).toBe("power on");

      // undeploy: teardown, then automated cleaning again
      await walk([["deleted", "clean wait"]]);
      await withAgent("available");

      // manual cleaning
      await walk([
        ["manage", "manageable"],
        [
          { target: "clean", clean_steps: [{ interface: "deploy", step: "erase_devices_metadata" }] },
          "clean wait",
        ],
      ]);
      const final = await withAgent("manageable");
      expect(final.last_error).toBeNull();
      return { calls: power.of(node.uuid), final };
    } finally {
      await ctx.stop();
    }
  }

  it("cleans, deploys, undeploys and cleans again with reboots only, and no power off reaches the driver", async () => {
    const { calls, final } = await lifecycle(true);
    expect(calls.filter((c) => POWER_OFFS.includes(c))).toEqual([]);
    expect(calls).toEqual([
      "power on", // automated cleaning: into the ramdisk from the enrolled node's power off
      "reboot", // out of the ramdisk after cleaning (Ironic's tear_down_inband_cleaning)
      "reboot", // deploy: into the ramdisk
      "reboot", // boot_instance: from the ramdisk into the disk
      "reboot", // servicing: into the ramdisk
      "reboot", // and back to the instance (Ironic's tear_down_inband_service)
      "reboot", // teardown: off the instance once its boot configuration is gone (Ironic's clean_up)
      "reboot", // automated cleaning after the undeploy: into the ramdisk
      "reboot", // and out of it
      "reboot", // manual cleaning: into the ramdisk
      "reboot", // and out of it
    ]);
    expect(final.power_state).toBe("power on");
  }, 180_000);

  it("control: the same flows without the flag power the node off after each ramdisk job", async () => {
    const { calls, final } = await lifecycle(false);
    // clean (on, off), deploy (on, then off and on in boot_instance), service (a reboot in, off and on out),
    // teardown (off), clean twice (on, off)
    expect(calls).toEqual([
      ...["power on", "power off"],
      ...["power on", "power off", "power on"],
      ...["reboot", "power off", "power on"],
      "power off",
      ...["power on", "power off"],
      ...["power on", "power off"],
    ]);
    expect(final.power_state).toBe("power off");
  }, 180_000);
});
