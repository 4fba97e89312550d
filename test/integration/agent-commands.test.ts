import { createHash, randomBytes } from "node:crypto";
import { mkdir, mkdtemp, open, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COMMANDS } from "../../agent/commands/registry.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { AgentLink } from "../../agent/link/client.ts";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { silentLogger } from "../../shared/log.ts";
import { exec } from "../../shared/system/exec.ts";
import type { Progress } from "../../shared/protocol.ts";
import { ROOT, sampleInventory, startGatewayServer } from "../helpers/agent.ts";
import { waitFor } from "../helpers/wait.ts";
import type { GatewayServer } from "../helpers/agent.ts";
import { readRange } from "../helpers/disk.ts";
import { startHttpImageServer } from "../helpers/http-image-server.ts";
import type { HttpImageServer } from "../helpers/http-image-server.ts";

const NODE = "55555555-5555-4555-8555-555555555555";
const MAC = "52:54:00:55:55:55";
const DISK_BYTES = 64 * 1024 * 1024;
const MIB = 1024 * 1024;

/** Disk commands through the real gateway and link, on a simulated machine whose disk is a file. */
describe("disk commands over the link", () => {
  let dir: string;
  let disk: string;
  let gw: GatewayServer;
  let link: AgentLink;
  let images: HttpImageServer;
  let image: Buffer;

  beforeAll(async () => {
    await mkdir(join(ROOT, ".tmp"), { recursive: true });
    dir = await mkdtemp(join(ROOT, ".tmp/agent-commands-"));
    disk = join(dir, "disk0.img");
    await writeFile(disk, "");
    await truncate(disk, DISK_BYTES);
    image = randomBytes(6 * MIB);
    await writeFile(join(dir, "image.raw"), image);
    images = await startHttpImageServer();
    images.serve("/image.raw", join(dir, "image.raw"));
    const directory = new MemoryAgentDirectory();
    directory.addNode({ uuid: NODE, macs: [MAC] });
    gw = await startGatewayServer({ directory, logger: silentLogger });
    link = new AgentLink({
      url: gw.url,
      backend: new SimulatedBackend({ inventory: sampleInventory({ macs: [MAC], diskFile: disk }) }),
      commands: COMMANDS,
      logger: silentLogger,
      agentVersion: "test",
    });
    link.start();
    await waitFor(() => gw.gateway.isConnected(NODE), { what: "connect" });
  });

  afterAll(async () => {
    await link?.stop();
    await gw?.gateway.close();
    await gw?.kill();
    await images?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("write_image streams the image onto the disk the hints pick, with progress", async () => {
    const sha256 = createHash("sha256").update(image).digest("hex");
    const progress: Progress[] = [];
    const result = (await gw.gateway.call(
      NODE,
      {
        name: "write_image",
        args: {
          image: {
            url: `${images.url}/image.raw`,
            image_type: "whole-disk",
            checksum: { algo: "sha256", value: sha256 },
          },
          root_device: { serial: "sim-0001" },
        },
      },
      { onProgress: (p) => progress.push(p) },
    )) as { root_device: { name: string }; checksum: { value: string } };
    expect(result.root_device.name).toBe(disk);
    expect(result.checksum.value).toBe(sha256);
    const written = await readFile(disk);
    expect(createHash("sha256").update(written.subarray(0, image.length)).digest("hex")).toBe(sha256);
    expect(progress.some((p) => p.step === "write_image" && p.bytes_done === image.length)).toBe(true);
  });

  it("write_image fails with NO_ROOT_DEVICE when no disk matches the hints", async () => {
    const call = gw.gateway.call(NODE, {
      name: "write_image",
      args: {
        image: { url: `${images.url}/image.raw`, image_type: "whole-disk" },
        root_device: { size: ">= 100" },
      },
    });
    await expect(call).rejects.toMatchObject({ code: "NO_ROOT_DEVICE", retryable: false });
  });

  it("write_image reports a checksum mismatch as a failure, never success", async () => {
    const call = gw.gateway.call(NODE, {
      name: "write_image",
      args: {
        image: {
          url: `${images.url}/image.raw`,
          image_type: "whole-disk",
          checksum: { algo: "md5", value: "0".repeat(32) },
        },
      },
    });
    await expect(call).rejects.toMatchObject({
      code: "COMMAND_FAILED_RETRYABLE",
      message: expect.stringMatching(/mismatch/),
    });
  });

  it("erase_devices_metadata zeroes both ends of every disk", async () => {
    const handle = await open(disk, "r+");
    await handle.write(Buffer.alloc(4096, 0xab), 0, 4096, DISK_BYTES - 4096);
    await handle.close();
    const result = (await gw.gateway.call(NODE, { name: "erase_devices_metadata" })) as {
      devices: Array<{ device: string }>;
    };
    expect(result.devices.map((d) => d.device)).toEqual([disk]);
    const bytes = await readFile(disk);
    expect(bytes.subarray(0, MIB).every((b) => b === 0)).toBe(true);
    expect(bytes.subarray(DISK_BYTES - MIB).every((b) => b === 0)).toBe(true);
    expect(bytes.subarray(MIB, MIB + 4096).equals(image.subarray(MIB, MIB + 4096))).toBe(true); // the middle is left alone
  });

  it("erase_devices discards a file disk (a punched hole reads zeros) and verifies it", async () => {
    await writeFile(disk, randomBytes(DISK_BYTES));
    const result = (await gw.gateway.call(NODE, { name: "erase_devices" })) as {
      devices: Array<Record<string, unknown>>;
    };
    expect(result.devices).toEqual([
      {
        device: disk,
        method: "discard",
        verified: true,
        bytes: DISK_BYTES,
        seconds: expect.any(Number),
        skipped: null,
      },
    ]);
    expect((await readFile(disk)).every((b) => b === 0)).toBe(true);
  });

  it("erase_devices overwrites (random, then zeros) when discard is not allowed, with byte progress", async () => {
    await writeFile(disk, randomBytes(DISK_BYTES));
    const progress: Progress[] = [];
    const result = (await gw.gateway.call(
      NODE,
      { name: "erase_devices", args: { enable_discard: false } },
      { onProgress: (p) => progress.push(p) },
    )) as { devices: Array<Record<string, unknown>> };
    expect(result.devices).toMatchObject([
      { device: disk, method: "overwrite", verified: true, bytes: DISK_BYTES },
    ]);
    expect((await readFile(disk)).every((b) => b === 0)).toBe(true);
    // two passes (shred_random_overwrite_iterations 1 + shred_final_overwrite_with_zeros)
    expect(progress.at(-1)).toMatchObject({
      step: `erase_devices ${disk}`,
      bytes_done: 2 * DISK_BYTES,
      bytes_total: 2 * DISK_BYTES,
    });
  });

  it("erase_devices skips a disk listed in skip_block_devices and says so", async () => {
    await writeFile(disk, Buffer.alloc(DISK_BYTES, 0x77));
    const result = (await gw.gateway.call(NODE, {
      name: "erase_devices",
      args: { skip_block_devices: [{ serial: "SIM-0001" }] },
    })) as { devices: Array<Record<string, unknown>> };
    expect(result.devices).toEqual([
      {
        device: disk,
        method: null,
        verified: false,
        bytes: 0,
        seconds: 0,
        skipped: "listed in the node's skip_block_devices",
      },
    ]);
    expect((await readRange(disk, 0, 16)).every((b) => b === 0x77)).toBe(true);
  });

  it("erase_devices rejects an unknown option as BAD_ARGS", async () => {
    const call = gw.gateway.call(NODE, { name: "erase_devices", args: { shred_passes: 3 } });
    await expect(call).rejects.toMatchObject({ code: "BAD_ARGS" });
  });

  it("collect_logs returns a base64 tarball holding the inventory and kernel state", async () => {
    const { logs } = (await gw.gateway.call(NODE, { name: "collect_logs" })) as { logs: string };
    const archive = join(dir, "logs.tar.gz");
    await writeFile(archive, Buffer.from(logs, "base64"));
    const listing = await exec("tar", ["tzf", archive]);
    expect(listing.code).toBe(0);
    expect(listing.stdout).toContain("./inventory.json");
    expect(listing.stdout).toContain("./cmdline.txt");
    const inventory = await exec("tar", ["xzOf", archive, "./inventory.json"]);
    expect(JSON.parse(inventory.stdout)).toMatchObject({ hostname: "sim-node" });
  });

  it("erase_devices_metadata refuses devices that are not disks of the machine", async () => {
    const call = gw.gateway.call(NODE, {
      name: "erase_devices_metadata",
      args: { devices: ["/etc/passwd"] },
    });
    await expect(call).rejects.toMatchObject({ code: "BAD_ARGS" });
  });
});
