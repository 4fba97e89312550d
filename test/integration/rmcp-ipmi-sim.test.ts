import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { observeSpawns } from "../../shared/system/exec.ts";
import { parseIpmiDriverInfo } from "../../conductor/drivers/ipmi/driver-info.ts";
import { IpmiCommandError, Ipmitool } from "../../conductor/drivers/ipmi/ipmitool.ts";
import { RmcpClient } from "../../conductor/drivers/ipmi/rmcp/client.ts";
import type { RmcpTarget } from "../../conductor/drivers/ipmi/rmcp/client.ts";
import { startIpmiSim } from "../helpers/ipmi-sim.ts";
import type { IpmiSim } from "../helpers/ipmi-sim.ts";

const PASSWORD = "Rmcp-pw-not-in-argv";

describe("native RMCP+ status against a real ipmi_sim", () => {
  let sim: IpmiSim;
  let target: RmcpTarget;
  const client = new RmcpClient({ packetTimeoutMs: 300, retries: 0 });
  const ipmitool = new Ipmitool({ minIntervalMs: 0 });
  const argvs: string[][] = [];
  const stopObserving = observeSpawns((command, args) => argvs.push([command, ...args]));

  beforeAll(async () => {
    sim = await startIpmiSim({ password: PASSWORD, initialPower: "off" });
    target = {
      host: sim.host,
      port: sim.port,
      username: sim.username,
      password: PASSWORD,
      privilege: "ADMINISTRATOR",
    };
  });
  afterAll(async () => {
    stopObserving();
    await client.close();
    await sim.stop();
  });

  it("reports what ipmitool reports after `chassis power on` and `chassis power off`", async () => {
    const info = parseIpmiDriverInfo(sim.driverInfo());
    for (const verb of ["on", "off", "on"] as const) {
      await ipmitool.run(info, ["chassis", "power", verb]);
      const byIpmitool = await ipmitool.run(info, ["chassis", "power", "status"]);
      expect(byIpmitool).toContain(`Chassis Power is ${verb}`);
      expect(await client.powerIsOn(target)).toBe(verb === "on");
    }
  });

  it("with Get Channel Authentication Capabilities asked first, as ipmitool does, reads the same", async () => {
    const probing = new RmcpClient({ packetTimeoutMs: 300, retries: 0, alwaysProbe: true });
    try {
      for (const state of ["on", "off"] as const) {
        await sim.setPower(state);
        expect(await probing.powerIsOn(target)).toBe(state === "on");
      }
    } finally {
      await probing.close();
    }
  });

  it("sees a change made behind its back, query after query (each its own session, closed)", async () => {
    for (let i = 0; i < 20; i++) {
      const state = i % 2 === 0 ? "off" : "on";
      await sim.setPower(state);
      expect(await client.powerIsOn(target)).toBe(state === "on");
    }
  });

  it("runs many queries at once over its one socket", async () => {
    await sim.setPower("on");
    const answers = await Promise.all(Array.from({ length: 12 }, () => client.powerIsOn(target)));
    expect(answers).toEqual(Array.from({ length: 12 }, () => true));
  });

  it("a wrong password is an auth failure that names it, not a retryable one", async () => {
    const error = await client
      .powerIsOn({ ...target, password: "not-the-password" })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IpmiCommandError);
    expect((error as IpmiCommandError).kind).toBe("auth");
    expect((error as IpmiCommandError).retryable).toBe(false);
    expect((error as Error).message).toMatch(/wrong password/);
    expect((error as Error).message).not.toContain("not-the-password");
  });

  it("an unknown user is refused by the BMC and said so", async () => {
    const error = await client.powerIsOn({ ...target, username: "nobody" }).catch((e: unknown) => e);
    expect((error as IpmiCommandError).kind).toBe("auth");
    expect((error as Error).message).toMatch(/unknown user name/);
  });

  it("a password past IPMI v2.0's 20 bytes is refused before anything is sent, as ipmitool does", async () => {
    const error = await client.powerIsOn({ ...target, password: "p".repeat(21) }).catch((e: unknown) => e);
    expect((error as IpmiCommandError).kind).toBe("auth");
    expect((error as Error).message).toMatch(/longer than 20 bytes/);
  });

  it("a silent BMC is unreachable (retryable) after the packet's retries", async () => {
    const resentBefore = client.counters.resent;
    const error = await client
      .powerIsOn({ ...target, port: sim.port === 65535 ? 65534 : sim.port + 1 })
      .catch((e: unknown) => e);
    expect((error as IpmiCommandError).kind).toBe("unreachable");
    expect((error as IpmiCommandError).retryable).toBe(true);
    // ipmitool's -R 2: the first packet went out three times
    expect(client.counters.resent - resentBefore).toBe(2);
  });

  it("the password is in no argv of any program the test ran", () => {
    const natives = argvs.filter((argv) => argv.some((arg) => arg.includes(PASSWORD)));
    expect(natives).toEqual([]);
  });
});
