import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordingLogger } from "../helpers/log.ts";
import { observeSpawns } from "../../shared/system/exec.ts";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";
import { DriverError } from "../../conductor/drivers/errors.ts";
import { parseIpmiDriverInfo } from "../../conductor/drivers/ipmi/driver-info.ts";
import { Ipmitool, IpmiCommandError } from "../../conductor/drivers/ipmi/ipmitool.ts";
import { IpmitoolPower } from "../../conductor/drivers/power/ipmitool.ts";
import { IpmitoolManagement } from "../../conductor/drivers/management/ipmitool.ts";
import { freeUdpPort, startIpmiSim } from "../helpers/ipmi-sim.ts";
import type { IpmiSim } from "../helpers/ipmi-sim.ts";

const PASSWORD = "Pa55-never-in-argv";

function nodeFor(driverInfo: Record<string, unknown>, properties: Record<string, unknown> = {}): DriverNode {
  return {
    uuid: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
    name: "node-1",
    driver_info: driverInfo,
    properties,
    instance_info: {},
    driver_internal_info: {},
    ports: [],
  };
}

describe("ipmitool drivers against a real ipmi_sim", () => {
  let sim: IpmiSim;
  const argvs: string[][] = [];
  const logLines: string[] = [];
  const stopObserving = observeSpawns((command, args) => argvs.push([command, ...args]));
  const logger = recordingLogger(logLines);
  const ipmitool = new Ipmitool({ minIntervalMs: 50, retryDelayMs: 100, logger });
  const power = new IpmitoolPower({
    ipmitool,
    pollIntervalMs: 100,
    powerTimeoutMs: 5000,
    softPowerTimeoutMs: 5000,
  });
  const management = new IpmitoolManagement({ ipmitool });
  let node: DriverNode;

  beforeAll(async () => {
    sim = await startIpmiSim({ password: PASSWORD });
    node = nodeFor({ ...sim.driverInfo(), ipmi_port: String(sim.port) });
  });
  afterAll(async () => {
    stopObserving();
    await sim.stop();
  });

  it("reads the power state the BMC reports", async () => {
    expect(await power.getPowerState(node)).toBe("power off");
    await sim.setPower("on");
    expect(await power.getPowerState(node)).toBe("power on");
    await sim.setPower("off");
  });

  it("runs ipmitool without the system's 4.7 MB enterprise number registry, and still reads the state", async () => {
    // A wrapper that traces which files ipmitool opens; the full-registry runner shows the trace can see it.
    const dir = await mkdtemp(join(tmpdir(), "anvil-ipmi-trace-"));
    const opened = async (fullEnterpriseRegistry: boolean): Promise<string> => {
      const trace = join(dir, `trace-${String(fullEnterpriseRegistry)}`);
      const wrapper = join(dir, `ipmitool-${String(fullEnterpriseRegistry)}`);
      await writeFile(wrapper, `#!/bin/sh\nexec strace -f -qq -e trace=openat -o ${trace} ipmitool "$@"\n`, {
        mode: 0o700,
      });
      const traced = new IpmitoolPower({
        ipmitool: new Ipmitool({ binary: wrapper, fullEnterpriseRegistry }),
      });
      expect(await traced.getPowerState(node)).toBe(await sim.power().then((s) => `power ${s}`));
      return readFile(trace, "utf8");
    };
    try {
      const SYSTEM_REGISTRY = '"/usr/share/misc/enterprise-numbers.txt"';
      expect(await opened(true)).toContain(SYSTEM_REGISTRY);
      const lean = await opened(false);
      expect(lean).not.toContain(SYSTEM_REGISTRY);
      expect(lean).toMatch(
        /anvil-ipmitool-[^"]*\/\.local\/usr\/share\/misc\/enterprise-numbers\.txt", O_RDONLY\) = \d/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("switches on and off, and the chassis follows", async () => {
    await power.setPowerState(node, "power on");
    expect(await sim.power()).toBe("on");
    await power.setPowerState(node, "power off");
    expect(await sim.power()).toBe("off");
  });

  it("soft power off asks the OS to shut down (ipmi_sim 'shutdown')", async () => {
    await power.setPowerState(node, "power on");
    await power.setPowerState(node, "power off", { soft: true });
    expect(await sim.power()).toBe("off");
    expect((await sim.events()).at(-1)).toBe("shutdown 1");
  });

  it("reboot switches a running node off, then on", async () => {
    await power.setPowerState(node, "power on");
    const before = (await sim.events()).length;
    await power.reboot(node);
    expect((await sim.events()).slice(before)).toEqual(["power 0", "power 1"]);
    expect(await sim.power()).toBe("on");
  });

  it("sets the boot device, one-time and persistent", async () => {
    await management.setBootDevice(node, { device: "pxe", persistent: false });
    expect(await sim.bootDevice()).toBe("pxe");
    expect((await management.getBootDevice(node)).boot_device).toBe("pxe");
    await management.setBootDevice(node, { device: "disk", persistent: true });
    expect(await sim.bootDevice()).toBe("default");
    expect((await management.getBootDevice(node)).boot_device).toBe("disk");
    expect(argvs.at(-2)?.slice(-4)).toEqual(["chassis", "bootdev", "disk", "options=persistent"]);
  });

  it("asks for an EFI boot when the node's boot_mode is uefi", async () => {
    const uefi = nodeFor(node.driver_info, { capabilities: "boot_mode:uefi" });
    await management.setBootDevice(uefi, { device: "pxe", persistent: true });
    expect(argvs.at(-1)?.slice(-2)).toEqual(["pxe", "options=persistent,efiboot"]);
    expect(await sim.bootDevice()).toBe("pxe");
  });

  it("fails clearly when the BMC rejects a boot device although ipmitool exits 0", async () => {
    await sim.rejectBootDevice(true);
    try {
      const error = await management
        .setBootDevice(node, { device: "cdrom", persistent: false })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(IpmiCommandError);
      expect((error as IpmiCommandError).kind).toBe("rejected");
      expect((error as Error).message).toMatch(/Set Chassis Boot Parameter 5 failed/);
    } finally {
      await sim.rejectBootDevice(false);
    }
  });

  it("a wrong password is an auth failure, not retried, and says so", async () => {
    const spawnsBefore = argvs.length;
    const wrong = nodeFor({ ...sim.driverInfo(), ipmi_password: "not-the-password" });
    const error = await power.getPowerState(wrong).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IpmiCommandError);
    expect((error as IpmiCommandError).kind).toBe("auth");
    expect((error as IpmiCommandError).retryable).toBe(false);
    expect((error as Error).message).toMatch(/wrong password/);
    expect(argvs.length - spawnsBefore).toBe(1);
  });

  it("a BMC that does not answer fails with a clear, retryable error after the configured attempts", async () => {
    const silent = new Ipmitool({
      sessionTimeoutSec: 1,
      sessionRetries: 0,
      retries: 1,
      retryDelayMs: 10,
      logger,
    });
    const port = await freeUdpPort(); // nothing listens there
    const started = Date.now();
    const error = await new IpmitoolPower({ ipmitool: silent })
      .getPowerState(
        nodeFor({
          ipmi_address: "127.0.0.1",
          ipmi_port: port,
          ipmi_username: "admin",
          ipmi_password: PASSWORD,
        }),
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IpmiCommandError);
    expect((error as IpmiCommandError).kind).toBe("unreachable");
    expect((error as IpmiCommandError).retryable).toBe(true);
    expect((error as Error).message).toContain(`127.0.0.1:${port}`);
    console.log(`unreachable BMC reported after ${Date.now() - started} ms (2 attempts, -N 1 -R 1)`);
  });

  it("serialises commands to one BMC and keeps the minimum interval between them", async () => {
    const spaced = new Ipmitool({ minIntervalMs: 150 });
    const starts: number[] = [];
    const stop = observeSpawns(() => starts.push(Date.now()));
    try {
      const states = await Promise.all(
        Array.from({ length: 4 }, () => new IpmitoolPower({ ipmitool: spaced }).getPowerState(node)),
      );
      expect(new Set(states).size).toBe(1);
    } finally {
      stop();
    }
    expect(starts).toHaveLength(4);
    // Each start waits for the previous run to end plus 150 ms, so starts are at least 150 ms apart.
    for (let i = 1; i < starts.length; i++) expect(starts[i]! - starts[i - 1]!).toBeGreaterThanOrEqual(150);
  });

  it("a command queued behind a slow one can be abandoned, and never runs", async () => {
    const queue = new Ipmitool({ sessionTimeoutSec: 1, sessionRetries: 1, retries: 0 });
    const info = parseIpmiDriverInfo({
      ipmi_address: "127.0.0.1",
      ipmi_port: await freeUdpPort(),
      ipmi_password: PASSWORD,
    });
    const spawnsBefore = argvs.length;
    const slow = queue.run(info, ["chassis", "power", "status"]).catch((e: unknown) => e); // ~2 s: nobody answers
    const controller = new AbortController();
    const queued = queue
      .run(info, ["chassis", "power", "on"], { signal: controller.signal })
      .catch((e: unknown) => e);
    setTimeout(() => controller.abort(new Error("caller gave up")), 100);
    expect(((await queued) as Error).message).toBe("caller gave up");
    expect(argvs.length - spawnsBefore).toBe(1); // only the slow one was spawned
    expect((await slow) as IpmiCommandError).toBeInstanceOf(IpmiCommandError);
    expect(argvs.slice(spawnsBefore).some((argv) => argv.includes("on"))).toBe(false);
  });

  it("never puts the password in argv or in a log line", () => {
    expect(argvs.length).toBeGreaterThan(10);
    for (const argv of argvs) expect(argv.join(" ")).not.toContain(PASSWORD);
    expect(logLines.length).toBeGreaterThan(0);
    for (const line of logLines) expect(line).not.toContain(PASSWORD);
  });
});

describe("ipmi_sim hooks (what the lab uses to drive QEMU)", () => {
  it("runs the hook on every change; a power change that does not stick fails clearly", async () => {
    const dir = await mkdtemp(join(tmpdir(), "anvil-hook-"));
    const hook = join(dir, "hook");
    // Records each call; refuses to stay on (like a machine whose PSU trips): power goes back to 0.
    await writeFile(
      hook,
      `#!/bin/sh\necho "$1 $2" >> ${join(dir, "calls")}\n[ "$1" = power ] && [ "$2" = 1 ] && echo 0 > "$ANVIL_SIM_CHASSIS/power"\nexit 0\n`,
      { mode: 0o755 },
    );
    const sim = await startIpmiSim({ hook });
    try {
      const power = new IpmitoolPower({ pollIntervalMs: 50, powerTimeoutMs: 400 });
      const node = nodeFor(sim.driverInfo());
      await new IpmitoolManagement().setBootDevice(node, { device: "pxe", persistent: false });
      const error = await power.setPowerState(node, "power on").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DriverError);
      expect((error as DriverError).retryable).toBe(true);
      expect((error as Error).message).toMatch(/still reports power off .*wanted power on/);
      expect((await readFile(join(dir, "calls"), "utf8")).split("\n")).toEqual(["boot pxe", "power 1", ""]);
    } finally {
      await sim.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
