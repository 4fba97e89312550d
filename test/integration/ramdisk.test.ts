import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { IncomingMessage, Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { WebSocketServer } from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import { FrameSchema, PROTOCOL_VERSION } from "../../shared/protocol.ts";
import type { CommandFrame, Frame, Welcome } from "../../shared/protocol.ts";
import { InventorySchema } from "../../shared/inventory.ts";
import { ensureAgentBuilt } from "../helpers/agent.ts";
import { startQemu } from "../helpers/qemu.ts";
import type { QemuVm } from "../helpers/qemu.ts";

const ROOT = resolve(import.meta.dirname, "../..");
const STAND_IN = join(ROOT, "images/ramdisk/stand-in-agent.sh");
// The real agent, built first when missing or stale; ANVIL_RAMDISK_STAND_IN=1 swaps in a shell script with
// its command line that only dials, to test the ramdisk alone.
const USE_STAND_IN = process.env.ANVIL_RAMDISK_STAND_IN === "1";
const MAC = "52:54:00:4a:4e:01";
const BOOT_TIMEOUT_MS = 180_000;
const PANIC = /Kernel panic/;

/** What the fake conductor saw: plain HTTP requests (stand-in) and WebSocket frames (real agent). */
interface Seen {
  httpRequests: { url: string; userAgent: string }[];
  upgrades: string[];
  frames: Frame[];
}

/**
 * A conductor just big enough for one agent: it welcomes the first hello and asks for the inventory, so the
 * agent has to run its hardware probes inside the ramdisk.
 */
async function startFakeConductor(seen: Seen): Promise<Server> {
  const server = createServer((request, response) => {
    seen.httpRequests.push({ url: request.url ?? "", userAgent: request.headers["user-agent"] ?? "" });
    response.end("stand-in ok\n");
  });
  const wss = new WebSocketServer({ server });
  wss.on("connection", (socket, request: IncomingMessage) => {
    seen.upgrades.push(request.url ?? "");
    socket.on("message", (data: Buffer) => {
      const frame = FrameSchema.parse(JSON.parse(data.toString()));
      seen.frames.push(frame);
      if (frame.type !== "hello") return;
      const welcome: Welcome = {
        type: "welcome",
        v: PROTOCOL_VERSION,
        node_uuid: "00000000-0000-4000-8000-00000000a4a4",
        token: "ramdisk-test-token",
        heartbeat_interval_ms: 5_000,
        fast_track: false,
      };
      const command: CommandFrame = {
        type: "command",
        v: PROTOCOL_VERSION,
        id: "inventory-1",
        name: "get_inventory",
        args: {},
      };
      socket.send(JSON.stringify(welcome));
      socket.send(JSON.stringify(command));
    });
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  return server;
}

async function waitFor(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((done) => setTimeout(done, 200));
  }
}

describe(`the deploy ramdisk boots in QEMU and starts the agent (${USE_STAND_IN ? "stand-in" : "real agent"})`, () => {
  let dir: string;
  let server: Server;
  let port: number;
  let vm: QemuVm | undefined;
  let vmStarted = 0;
  const seen: Seen = { httpRequests: [], upgrades: [], frames: [] };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-ramdisk-test-"));
    const agent = USE_STAND_IN ? STAND_IN : await ensureAgentBuilt();
    // Cached by content under .tmp/cache: only the first run after a change compresses.
    const build = await exec("bash", ["images/ramdisk/build.sh", "--agent", agent, "--out", dir], {
      cwd: ROOT,
      timeoutMs: 900_000,
    });
    expect(build.code, build.stderr).toBe(0);
    server = await startFakeConductor(seen);
    port = (server.address() as AddressInfo).port;
    // Two empty disks with serials, so the inventory has something to find (sysfs only: no udev in the ramdisk).
    for (const name of ["nvme.raw", "virtio.raw"]) {
      const created = await exec("truncate", ["-s", "64M", join(dir, name)]);
      expect(created.code).toBe(0);
    }
    vmStarted = Date.now();
    vm = await startQemu({
      // The RAM docs/ramdisk.md says a node needs.
      memoryMb: 512,
      nics: [{ kind: "user", mac: MAC }],
      disks: [
        { path: join(dir, "virtio.raw"), format: "raw", serial: "ANVIL-VIRTIO-1", bus: "virtio" },
        { path: join(dir, "nvme.raw"), format: "raw", serial: "ANVIL-NVME-1", bus: "nvme" },
      ],
      boot: {
        kernel: join(dir, "anvil.kernel"),
        initrd: join(dir, "anvil.initramfs"),
        append: `console=ttyS0 anvil.conductor=ws://10.0.2.2:${port}/v1/agent BOOTIF=01-${MAC.replaceAll(":", "-")}`,
      },
    });
  }, 1_000_000);

  afterAll(async () => {
    await vm?.stop();
    await new Promise((done) => server?.close(done));
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it(
    "loads every listed module",
    async () => {
      // The console ends lines with \r\n; the line after the module list proves the list is complete.
      const text = await vm!.waitForSerial(/anvil-init: modules loaded:[^\n]*\n/, {
        timeoutMs: BOOT_TIMEOUT_MS,
        failOn: PANIC,
      });
      const loaded = /anvil-init: modules loaded:([^\r\n]*)/.exec(text)?.[1]?.trim().split(" ") ?? [];
      for (const module of [
        "virtio_net",
        "virtio_blk",
        "nvme",
        "ahci",
        "md_mod",
        "raid1",
        "raid456",
        "loop",
      ]) {
        expect(loaded).toContain(module);
      }
      expect(text).not.toContain("modules that failed to load");
    },
    BOOT_TIMEOUT_MS,
  );

  it(
    "names the boot interface and gets a DHCP lease on it",
    async () => {
      const text = await vm!.waitForSerial(/anvil-dhcp: eth0: bound/, {
        timeoutMs: BOOT_TIMEOUT_MS,
        failOn: PANIC,
      });
      expect(text).toContain(`anvil-init: eth0 (${MAC}) is the boot interface`);
      expect(text).toMatch(/anvil-dhcp: eth0: bound 10\.0\.2\.15\/24 router 10\.0\.2\.2 dns 10\.0\.2\.3/);
    },
    BOOT_TIMEOUT_MS,
  );

  it(
    "starts the agent with the conductor URL from the kernel command line",
    async () => {
      const text = await vm!.waitForSerial(/anvil-init: starting agent/, {
        timeoutMs: BOOT_TIMEOUT_MS,
        failOn: PANIC,
      });
      expect(text).toContain(
        `anvil-agent service --conductor ws://10.0.2.2:${port}/v1/agent --log-level info --token-file /run/anvil/token`,
      );
    },
    BOOT_TIMEOUT_MS,
  );

  it.runIf(!USE_STAND_IN)(
    "the agent dials the conductor and says hello with the boot interface's MAC",
    async () => {
      await waitFor(() => seen.frames.some((frame) => frame.type === "hello"), BOOT_TIMEOUT_MS);
      const seconds = ((Date.now() - vmStarted) / 1000).toFixed(1);
      const text = await vm!.readSerial();
      const uptime = /starting agent \(up ([0-9.]+)s\)/.exec(text)?.[1];
      // Measured, not asserted (tests never fail on time): QEMU start -> hello, and guest uptime at agent start.
      console.log(
        `ramdisk under TCG: hello ${seconds} s after QEMU started; agent started at guest uptime ${uptime} s`,
      );
      expect(seen.upgrades[0]).toBe("/v1/agent");
      expect(seen.frames[0]).toMatchObject({ type: "hello", macs: expect.arrayContaining([MAC]) as unknown });
    },
    BOOT_TIMEOUT_MS,
  );

  it.runIf(!USE_STAND_IN)(
    "the agent's inventory, taken inside the ramdisk, finds both disks by serial and the NIC",
    async () => {
      await waitFor(() => seen.frames.some((frame) => frame.type === "result"), BOOT_TIMEOUT_MS);
      const result = seen.frames.find((frame) => frame.type === "result");
      expect(result).toMatchObject({ id: "inventory-1", ok: true });
      const inventory = InventorySchema.parse(result?.type === "result" && result.ok ? result.value : null);
      const disks = inventory.disks.map((disk) => ({
        name: disk.name,
        serial: disk.serial,
        size: disk.size,
      }));
      expect(disks).toEqual(
        expect.arrayContaining([
          { name: "/dev/vda", serial: "ANVIL-VIRTIO-1", size: 64 * 1024 * 1024 },
          { name: "/dev/nvme0n1", serial: "ANVIL-NVME-1", size: 64 * 1024 * 1024 },
        ]),
      );
      expect(inventory.interfaces.map((nic) => nic.mac_address)).toContain(MAC);
    },
    BOOT_TIMEOUT_MS,
  );

  it.runIf(USE_STAND_IN)(
    "the stand-in reaches the conductor and init restarts it when it exits",
    async () => {
      await waitFor(() => seen.httpRequests.length > 0, BOOT_TIMEOUT_MS);
      expect(seen.httpRequests[0]).toEqual({ url: "/v1/agent", userAgent: "anvil-agent-stand-in" });
      const text = await vm!.waitForSerial(/agent exited with status 1 after \d+s; restarting in 1s/, {
        timeoutMs: BOOT_TIMEOUT_MS,
        failOn: PANIC,
      });
      expect(text).toContain("anvil-agent (stand-in): conductor answered");
    },
    BOOT_TIMEOUT_MS,
  );
});
