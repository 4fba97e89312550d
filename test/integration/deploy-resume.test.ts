import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { open, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { COMMANDS } from "../../agent/commands/registry.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { AgentLink } from "../../agent/link/client.ts";
import { agentEndpointOf } from "../../conductor/agents/endpoint.ts";
import type { CallOptions, DriverNode } from "../../conductor/drivers/interfaces.ts";
import { recordingLogger, sampleInventory } from "../helpers/agent.ts";
import { api, startConductor, waitForState } from "../helpers/conductor.ts";
import { CountingPower, fakeHardwareWith } from "../helpers/counting-power.ts";
import { MiB, sha256, sparseCopyWithBlockMap } from "../helpers/disk.ts";
import { startHttpImageServer, type HttpImageServer } from "../helpers/http-image-server.ts";
import { until } from "../helpers/wait.ts";
import { directDeployWaiting } from "../helpers/mid-write.ts";

/** Fake power whose reboot boots the simulated machine again (a fresh agent, a fresh boot id). */
class RebootingPower extends CountingPower {
  onReboot: (() => void) | undefined;
  override async reboot(node: DriverNode, options: CallOptions = {}): Promise<void> {
    await super.reboot(node, options);
    this.onReboot?.();
  }
}

/** A simulated machine on one disk file: each boot is a new agent with a new boot id; a crash kills it. */
function simulatedMachine(options: { url: string; mac: string; disk: string }) {
  let link: AgentLink | undefined;
  let bootId = "";
  /** The token of this boot, as --token-file keeps it on the ramdisk's tmpfs. */
  let token: string | undefined;
  const logs: string[][] = [];
  const start = (): void => {
    const log = recordingLogger();
    logs.push(log.lines);
    link = new AgentLink({
      url: agentEndpointOf(options.url),
      backend: new SimulatedBackend({
        inventory: sampleInventory({ macs: [options.mac], diskFile: options.disk }),
        bootId,
      }),
      commands: COMMANDS,
      logger: log,
      agentVersion: "test",
      backoff: { initialMs: 100, maxMs: 300 },
      ...(token === undefined ? {} : { initialToken: token }),
      onTokenChange: (changed) => (token = changed),
    });
    link.start();
  };
  return {
    /** Agent processes started so far. */
    boots: () => logs.length,
    logOfBoot: (n: number) => logs[n] ?? [],
    boot(): void {
      bootId = randomUUID();
      token = undefined;
      start();
    },
    /** The agent process dies and starts again in the same boot, its token kept. */
    async restartAgent(): Promise<void> {
      await link?.stop();
      start();
    },
    /** The machine resets: its agent dies with whatever it was doing (the disk keeps what was written). */
    async crash(): Promise<void> {
      const dying = link;
      link = undefined;
      await dying?.stop();
    },
  };
}

interface Setup {
  url: string;
  uuid: string;
  image: Buffer;
  path: string;
  disk: string;
  images: HttpImageServer;
  machine: ReturnType<typeof simulatedMachine>;
  power: RebootingPower;
  resumeServer(): void;
  /** The conductor stops (handing the running step back to the agent) and starts again on its database and port. */
  stopConductor(): Promise<void>;
  startConductorAgain(): Promise<void>;
  cleanup(): Promise<void>;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/**
 * A direct deploy of a raw image of `imageMiB` MiB that the store sends `pauseMiB` MiB of per response
 * (until resumeServer()), with a durable checkpoint every MiB, taken to the point where the first agent is
 * writing.
 */
async function deployCaughtMidWrite(options: {
  imageMiB: number;
  pauseMiB: number;
  maxResumes?: number;
  /** MiB ranges [start, end) of the image that hold zeros; with it, the image comes with a block map. */
  holes?: [number, number][];
}): Promise<Setup> {
  const dir = mkdtempSync(join(tmpdir(), "anvil-resume-"));
  const power = new RebootingPower();
  const drivers = fakeHardwareWith(power);
  const settings = { deploy: { resumeCheckpointBytes: MiB, maxResumes: options.maxResumes ?? 3 } };
  let ctx: Awaited<ReturnType<typeof startConductor>> | undefined = await startConductor(settings, {
    drivers,
  });
  const { url, config } = ctx;
  const images = await startHttpImageServer();
  const image = randomBytes(options.imageMiB * MiB);
  for (const [start, end] of options.holes ?? []) image.fill(0, start * MiB, end * MiB);
  const path = "/resume.raw";
  await writeFile(join(dir, "source.raw"), image);
  const bmap = options.holes === undefined ? undefined : "/resume.bmap";
  if (bmap === undefined) await writeFile(join(dir, "resume.raw"), image);
  else {
    await sparseCopyWithBlockMap(join(dir, "source.raw"), join(dir, "resume.raw"), join(dir, "resume.bmap"));
    images.serve(bmap, join(dir, "resume.bmap"));
  }
  let resumeServer = (): void => undefined;
  images.serve(path, join(dir, "resume.raw"), {
    pauseAfterBytes: options.pauseMiB * MiB,
    resumeWhen: new Promise<void>((r) => (resumeServer = r)),
  });
  const disk = join(dir, "node.disk");
  const mac = "52:54:00:29:00:01";
  const uuid = await directDeployWaiting({
    url,
    images,
    path,
    image,
    disk,
    mac,
    ...(bmap === undefined ? {} : { bmapPath: bmap }),
  });
  const machine = simulatedMachine({ url, mac, disk });
  power.onReboot = () => {
    void machine.crash().then(() => machine.boot());
  };
  machine.boot();
  const cleanup = async (): Promise<void> => {
    power.onReboot = undefined;
    resumeServer();
    await machine.crash();
    await ctx?.stop();
    await images.close();
    rmSync(dir, { recursive: true, force: true });
  };
  cleanups.push(cleanup);
  const stopConductor = async (): Promise<void> => {
    // NOTE: conductor.stop, not ctx.stop: the helper's stop also removes the data directory
    await ctx?.conductor.stop();
    ctx = undefined;
  };
  const startConductorAgain = async (): Promise<void> => {
    const port = Number(new URL(url).port);
    ctx = await startConductor(
      { ...settings, port, dataDir: config.dataDir, databasePath: config.databasePath },
      { drivers },
    );
  };
  return {
    url,
    uuid,
    image,
    path,
    disk,
    images,
    machine,
    power,
    resumeServer,
    stopConductor,
    startConductorAgain,
    cleanup,
  };
}

async function nodeOf(
  setup: Setup,
): Promise<Record<string, unknown> & { driver_internal_info: Record<string, unknown> }> {
  return (await api(`${setup.url}/v1/nodes/${setup.uuid}`)).body as Record<string, unknown> & {
    driver_internal_info: Record<string, unknown>;
  };
}

/** Waits until the conductor keeps a durable checkpoint of at least `bytes`. */
async function checkpointReached(setup: Setup, bytes: number): Promise<number> {
  return until(
    async () => {
      const info = (await nodeOf(setup)).driver_internal_info;
      const kept = (info.deploy_resume as { checkpoint?: { bytes: number } | null } | undefined)?.checkpoint
        ?.bytes;
      return kept !== undefined && kept >= bytes ? kept : undefined;
    },
    { what: `a checkpoint of ${bytes} bytes` },
  );
}

async function diskHoldsImage(setup: Setup): Promise<void> {
  expect(sha256((await readFile(setup.disk)).subarray(0, setup.image.length))).toBe(sha256(setup.image));
}

/**
 * With max_resumes 0, the machine resets mid-write (while its conductor is down, with `restart`); resolves
 * with the node once its deploy failed, which took no reboot and left it powered off.
 */
async function resetPastResumes(options: { restart: boolean }): Promise<Record<string, unknown>> {
  const setup = await deployCaughtMidWrite({ imageMiB: 8, pauseMiB: 4, maxResumes: 0 });
  await checkpointReached(setup, MiB);
  if (options.restart) await setup.stopConductor();
  await setup.machine.crash();
  if (options.restart) await setup.startConductorAgain();
  setup.machine.boot();
  const failed = await until(
    async () => {
      const node = await nodeOf(setup);
      return node.provision_state === "deploy failed" ? node : undefined;
    },
    { what: "deploy failed" },
  );
  expect(setup.power.of(setup.uuid)).not.toContain("reboot");
  // a failed deploy powers the node off (Ironic's power_off_after_deploy_failure), whichever path failed it
  expect(failed.power_state).toBe("power off");
  return failed;
}

describe("a reboot mid-deploy", () => {
  it("resumes write_image from the disk's durable prefix, twice, and the store serves little more than one image", async () => {
    const setup = await deployCaughtMidWrite({ imageMiB: 12, pauseMiB: 4 });
    const first = await checkpointReached(setup, 3 * MiB);

    // the machine resets mid-write: a new boot dials in without a token; the conductor boots it again
    await setup.machine.crash();
    setup.machine.boot();
    await until(
      async () =>
        ((await nodeOf(setup)).driver_internal_info.deploy_resume as { resumes: number }).resumes === 1 ||
        undefined,
      {
        what: "the first resume",
      },
    );
    // the resumed write (from `first`) is caught by the store's pause again, 4 MiB further on
    const second = await checkpointReached(setup, first + 3 * MiB);
    await setup.machine.crash();
    setup.resumeServer();
    setup.machine.boot();

    const done = await waitForState(setup.url, setup.uuid, "active");
    await diskHoldsImage(setup);
    const info = done.driver_internal_info as Record<string, unknown>;
    expect(info.deploy_resume).toBeUndefined();
    const result = info.deploy_result as { resumed?: { from_bytes: number; reason?: string } };
    expect(result.resumed).toEqual({ from_bytes: second });
    // two boots refused (the crashes' next boots), two conductor reboots, five agents in all
    expect(setup.power.of(setup.uuid).filter((call) => call === "reboot")).toHaveLength(2);
    expect(setup.machine.boots()).toBe(5);
    const ranges = setup.images.requests.filter((r) => r.path === setup.path).map((r) => r.range);
    expect(ranges).toEqual([undefined, `bytes=${first}-`, `bytes=${second}-`]);
    // 4 MiB, then 4 MiB from `first`, then the rest from `second`: about 14 MiB for a 12 MiB image
    expect(setup.images.bytesServed(setup.path)).toBeLessThan(1.3 * setup.image.length);
    const history = (
      await api(`${setup.url}/v1/nodes/${setup.uuid}/history`, {
        headers: { "X-OpenStack-Ironic-API-Version": "1.78" },
      })
    ).body as { history: { event: string; severity: string }[] };
    const resumes = history.history.filter((h) => h.event.includes("booted again while write_image ran"));
    expect(resumes.map((h) => h.severity)).toEqual(["WARNING", "WARNING"]);
  });

  it("with a block map, resumes at the start of the range the checkpoint fell in: earlier ranges are not fetched again", async () => {
    // mapped: [0,1) [2,3) [4,10) MiB; the store pauses inside the 6 MiB range, 4 MiB in
    const setup = await deployCaughtMidWrite({
      imageMiB: 12,
      pauseMiB: 4,
      holes: [
        [1, 2],
        [3, 4],
        [10, 12],
      ],
    });
    await checkpointReached(setup, 6 * MiB);
    const before = setup.images.requests.filter((r) => r.path === setup.path).length;
    await setup.machine.crash();
    setup.resumeServer();
    setup.machine.boot();

    const done = await waitForState(setup.url, setup.uuid, "active");
    await diskHoldsImage(setup);
    const result = (done.driver_internal_info as Record<string, unknown>).deploy_result as {
      resumed?: { from_bytes: number };
    };
    expect(result.resumed).toEqual({ from_bytes: 4 * MiB });
    // after the reboot: the map's probe of the first bytes, then the range the checkpoint fell in, only
    const after = setup.images.requests.filter((r) => r.path === setup.path).slice(before);
    expect(after.map((r) => r.range)).toEqual(["bytes=0-7", `bytes=${4 * MiB}-${10 * MiB - 1}`]);
  });

  it("starts over when the disk's prefix changed between the reboot and the resume, and still writes the right image", async () => {
    const setup = await deployCaughtMidWrite({ imageMiB: 8, pauseMiB: 4 });
    await checkpointReached(setup, 3 * MiB);
    await setup.machine.crash();
    const handle = await open(setup.disk, "r+");
    await handle.write(randomBytes(4096), 0, 4096, MiB); // inside the kept prefix
    await handle.close();
    setup.resumeServer();
    setup.machine.boot();

    const done = await waitForState(setup.url, setup.uuid, "active");
    await diskHoldsImage(setup);
    const result = (done.driver_internal_info as Record<string, unknown>).deploy_result as {
      resumed?: { from_bytes: number; reason?: string };
    };
    expect(result.resumed?.from_bytes).toBe(0);
    expect(result.resumed?.reason).toMatch(/differ from the checkpoint/);
    const ranges = setup.images.requests.filter((r) => r.path === setup.path).map((r) => r.range);
    expect(ranges).toEqual([undefined, undefined]);
  });

  it("a new agent process of the same boot (its token kept) is sent write_image again with the checkpoint, and resumes", async () => {
    const setup = await deployCaughtMidWrite({ imageMiB: 8, pauseMiB: 4 });
    const kept = await checkpointReached(setup, 3 * MiB);
    await setup.machine.restartAgent();
    setup.resumeServer();

    const done = await waitForState(setup.url, setup.uuid, "active");
    await diskHoldsImage(setup);
    const result = (done.driver_internal_info as Record<string, unknown>).deploy_result as {
      resumed?: { from_bytes: number };
    };
    expect(result.resumed).toEqual({ from_bytes: kept });
    // no reboot: the process came back with its boot's token, and the pending command was sent again
    expect(setup.power.of(setup.uuid)).not.toContain("reboot");
    const ranges = setup.images.requests.filter((r) => r.path === setup.path).map((r) => r.range);
    expect(ranges).toEqual([undefined, `bytes=${kept}-`]);
  });

  it("a node that reboots while its conductor restarts resumes the write the restart handed back to its agent", async () => {
    const setup = await deployCaughtMidWrite({ imageMiB: 12, pauseMiB: 4 });
    const kept = await checkpointReached(setup, 3 * MiB);
    // the conductor stops mid-write (the step goes back to the agent: wait call-back), and while it is down
    // the machine resets; its next boot dials the restarted conductor with no command waiting there
    await setup.stopConductor();
    await setup.machine.crash();
    await setup.startConductorAgain();
    expect((await nodeOf(setup)).provision_state).toBe("wait call-back");
    setup.resumeServer();
    setup.machine.boot();

    const done = await waitForState(setup.url, setup.uuid, "active");
    await diskHoldsImage(setup);
    const result = (done.driver_internal_info as Record<string, unknown>).deploy_result as {
      resumed?: { from_bytes: number };
    };
    expect(result.resumed).toEqual({ from_bytes: kept });
    // the refused boot made the conductor boot the ramdisk again, once
    expect(setup.power.of(setup.uuid).filter((call) => call === "reboot")).toHaveLength(1);
    const ranges = setup.images.requests.filter((r) => r.path === setup.path).map((r) => r.range);
    expect(ranges).toEqual([undefined, `bytes=${kept}-`]);
  });

  it("a handed-back write past its resumes fails at the reboot, not at the wait timeout", async () => {
    const failed = await resetPastResumes({ restart: true });
    expect(String(failed.last_error)).toMatch(
      /more often than the 0 resumes allowed; the image was not written/,
    );
  });

  it("fails the deploy with a clear last_error once the node reboots more often than the resumes allowed", async () => {
    const failed = await resetPastResumes({ restart: false });
    expect(String(failed.last_error)).toMatch(
      /booted again 1 times while write_image ran \(at most 0 are resumed\)/,
    );
  });
});
