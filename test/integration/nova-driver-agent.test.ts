import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { provisionThrough, startConductor, waitForState } from "../helpers/conductor.ts";
import { ensureAgentBuilt, type AgentProcess } from "../helpers/agent.ts";
import { readConfigDriveIso, type ConfigDriveFiles } from "../helpers/config-drive.ts";
import { MiB, readRange, sha256 } from "../helpers/disk.ts";
import { startHttpImageServer, type HttpImageServer } from "../helpers/http-image-server.ts";
import { runOk } from "../helpers/run.ts";
import { enrollSimulatedNode } from "../helpers/simulated-node.ts";

const run = promisify(execFile);
const MAC = "52:54:00:00:23:01";

interface SfdiskTable {
  partitiontable: { sectorsize?: number; partitions: { start: number; size: number; name?: string }[] };
}

/**
 * Nova's Ironic driver (Debian's python3-nova) against a conductor whose node is deployed by the real agent
 * executable on simulated hardware (the disk is a file): spawn with a network and a config drive, then
 * destroy. The test plays the machine: it boots an agent whenever the conductor waits for one.
 */
describe("Nova's Ironic driver with the real agent on simulated hardware", () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-nova-agent-"));
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  let images: HttpImageServer;
  let image: Buffer;
  let disk = "";
  let uuid = "";
  const steps = new Map<string, string>();
  let output = "";
  const booted: string[] = [];
  let afterSpawn: { drive: ConfigDriveFiles; imageSha: string; configdriveStart: number } | null = null;
  let afterClean: Buffer | null = null;

  beforeAll(async () => {
    const executable = await ensureAgentBuilt();
    images = await startHttpImageServer();
    // a whole-disk image: GPT with one partition holding random bytes
    await writeFile(join(dir, "disk.raw"), Buffer.alloc(24 * MiB));
    await runOk("sfdisk", ["--quiet", "--label", "gpt", join(dir, "disk.raw")], {
      input: "start=2048, size=36864, name=rootfs\n",
    });
    image = await readFile(join(dir, "disk.raw"));
    randomBytes(4 * MiB).copy(image, 2 * MiB);
    await writeFile(join(dir, "disk.raw"), image);
    images.serve("/disk.raw", join(dir, "disk.raw"));

    ctx = await startConductor();
    const node = await enrollSimulatedNode({ url: ctx.url, dir, name: "nova-sim", mac: MAC, executable });
    uuid = node.uuid;
    disk = node.disk;
    const agents: AgentProcess[] = [];
    const boot = (): void => {
      agents.push(node.boot());
    };
    // The machine: an agent boots when the conductor waits for one, and goes when the node leaves that wait
    // (a deployed node reboots into its OS, a cleaned one powers off).
    let transitions = Promise.resolve();
    ctx.conductor.events.subscribe((event) => {
      if (event.node !== uuid || event.type !== "provision") return;
      const state = String(event.provision_state);
      transitions = transitions.then(async () => {
        if (state === "clean wait" || state === "wait call-back") {
          booted.push(state);
          boot();
        } else if (state === "active" || state === "available" || state === "manageable") {
          for (const agent of agents.splice(0)) await agent.stop();
        }
      });
    });

    await provisionThrough(ctx.url, uuid, [
      ["manage", "manageable"],
      ["provide", "available"],
    ]);

    // what the disk holds once the node is active, read before the destroy's cleaning boots an agent
    ctx.conductor.events.subscribe((event) => {
      if (event.node !== uuid || event.provision_state !== "active") return;
      transitions = transitions.then(async () => {
        const table = JSON.parse(await runOk("sfdisk", ["--json", disk])) as SfdiskTable;
        const sector = table.partitiontable.sectorsize ?? 512;
        const [, configdrive] = table.partitiontable.partitions;
        const start = (configdrive?.start ?? 0) * sector;
        await writeFile(join(dir, "cd.iso"), await readRange(disk, start, (configdrive?.size ?? 0) * sector));
        afterSpawn = {
          drive: await readConfigDriveIso(join(dir, "cd.iso")),
          imageSha: sha256(await readRange(disk, 1 * MiB, 18 * MiB)),
          configdriveStart: start,
        };
      });
    });

    const { stdout, stderr } = await run(
      "/usr/bin/python3",
      [
        "scripts/clients/nova_driver.py",
        "--endpoint",
        ctx.url,
        "--agent-node",
        uuid,
        "--image-url",
        `${images.url}/disk.raw`,
      ],
      { timeout: 150_000, maxBuffer: 16 * 1024 * 1024 },
    ).catch((error: { stdout?: string; stderr?: string; code?: number }) => {
      if (error.code !== 1) throw error;
      return { stdout: error.stdout ?? "", stderr: error.stderr ?? "" };
    });
    output = stdout + stderr;
    for (const line of stdout.split("\n")) {
      const match = /^STEP (\S+) (PASS|FAIL) ?(.*)$/.exec(line);
      if (match?.[1]) steps.set(match[1], `${match[2]} ${match[3] ?? ""}`.trim());
    }
    await waitForState(ctx.url, uuid, "available");
    await transitions;
    afterClean = await readRange(disk, 0, 1 * MiB);
  }, 300_000);
  afterAll(async () => {
    await ctx?.stop();
    await images?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("spawns with a network and a config drive, then destroys, every step passing", () => {
    expect([...steps.keys()], output).toEqual([
      "enroll",
      "spawn_with_network_and_configdrive",
      "destroy_with_network",
    ]);
    for (const [name, line] of steps) expect(line, `${name}: ${output}`).toMatch(/^PASS/);
    // the spawn line carries the time from Nova's first request to ACTIVE
    const seconds = Number(/seconds=(\S+)/.exec(steps.get("spawn_with_network_and_configdrive") ?? "")?.[1]);
    expect(seconds).toBeGreaterThan(0);
    console.info(`nova spawn -> ACTIVE with the real agent: ${seconds.toFixed(2)} s`);
  });

  it("the agent wrote the image, and Nova's config drive (with the VIF's MAC) on a partition after it", () => {
    expect(afterSpawn?.imageSha).toBe(sha256(image.subarray(1 * MiB, 19 * MiB)));
    expect(afterSpawn?.configdriveStart).toBeGreaterThanOrEqual(image.length);
    expect(afterSpawn?.drive.label).toBe("config-2");
    expect(afterSpawn?.drive.meta_data?.name).toBe("net");
    const links = (afterSpawn?.drive.network_data?.links ?? []) as { ethernet_mac_address?: string }[];
    expect(links.map((link) => link.ethernet_mac_address)).toContain(MAC);
  });

  it("destroy went through cleaning with an agent back to available, the disk's metadata erased", async () => {
    // one agent booted for the first clean, one for the deploy, one for the destroy's clean
    expect(booted).toEqual(["clean wait", "wait call-back", "clean wait"]);
    const node = await ctx.conductor.store.getNode(uuid);
    expect(node?.instance_uuid).toBeNull();
    expect(node?.instance_info).toEqual({});
    expect(afterClean?.subarray(0, 34 * 512).equals(Buffer.alloc(34 * 512))).toBe(true);
  });
});
