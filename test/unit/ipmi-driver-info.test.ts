import { describe, expect, it } from "vitest";
import { InvalidDriverInfo } from "../../conductor/drivers/errors.ts";
import { parseIpmiDriverInfo } from "../../conductor/drivers/ipmi/driver-info.ts";
import { classifyIpmitoolResult } from "../../conductor/drivers/ipmi/ipmitool.ts";
import { parseBootParam } from "../../conductor/drivers/management/ipmitool.ts";
import { parsePowerStatus } from "../../conductor/drivers/power/ipmitool.ts";

describe("IPMI driver_info", () => {
  it("fills Ironic's defaults", () => {
    expect(parseIpmiDriverInfo({ ipmi_address: "10.0.0.5", deploy_kernel: "http://x/k" })).toEqual({
      ipmi_address: "10.0.0.5",
      ipmi_port: 623,
      ipmi_username: "",
      ipmi_password: "",
      ipmi_priv_level: "ADMINISTRATOR",
      ipmi_cipher_suite: 3,
    });
  });

  it("accepts the CLI's numeric strings", () => {
    const info = parseIpmiDriverInfo({
      ipmi_address: "bmc1",
      ipmi_port: "6230",
      ipmi_cipher_suite: "17",
      ipmi_terminal_port: "9002",
    });
    expect([info.ipmi_port, info.ipmi_cipher_suite, info.ipmi_terminal_port]).toEqual([6230, 17, 9002]);
  });

  it.each([
    [{}, /driver_info\.ipmi_address is required/],
    [{ ipmi_address: "-oProxyCommand=x" }, /driver_info\.ipmi_address is invalid/],
    [{ ipmi_address: "a b" }, /driver_info\.ipmi_address is invalid/],
    [{ ipmi_address: "h", ipmi_port: "70000" }, /driver_info\.ipmi_port is invalid/],
    [{ ipmi_address: "h", ipmi_port: "abc" }, /driver_info\.ipmi_port is invalid/],
    [{ ipmi_address: "h", ipmi_priv_level: "ROOT" }, /driver_info\.ipmi_priv_level is invalid/],
    [{ ipmi_address: "h", ipmi_cipher_suite: 99 }, /driver_info\.ipmi_cipher_suite is invalid/],
  ])("rejects %j naming the field", (driverInfo, message) => {
    expect(() => parseIpmiDriverInfo(driverInfo)).toThrow(InvalidDriverInfo);
    expect(() => parseIpmiDriverInfo(driverInfo)).toThrow(message);
  });
});

describe("ipmitool output", () => {
  const ok = { code: 0, signal: null, stdout: "", stderr: "" };
  it("treats a rejected boot parameter as a failure although the exit code is 0", () => {
    expect(
      classifyIpmitoolResult({ ...ok, stderr: "Set Chassis Boot Parameter 5 failed: Unspecified error\n" })
        ?.kind,
    ).toBe("rejected");
  });
  it("tells a wrong password from a silent BMC", () => {
    const auth = "> RAKP 2 HMAC is invalid\nError: Unable to establish IPMI v2 / RMCP+ session\n";
    const silent = "Get Auth Capabilities error\nError: Unable to establish IPMI v2 / RMCP+ session\n";
    expect(classifyIpmitoolResult({ ...ok, code: 1, stderr: auth })?.kind).toBe("auth");
    expect(classifyIpmitoolResult({ ...ok, code: 1, stderr: silent })?.kind).toBe("unreachable");
  });
  it("ignores -v chatter on success", () => {
    const chatter =
      "Running Get VSO Capabilities my_addr 0x20\nInvalid completion code received: Invalid command\n";
    expect(classifyIpmitoolResult({ ...ok, stderr: chatter })).toBeNull();
  });
  it("parses power status and boot parameters", () => {
    expect(parsePowerStatus("Chassis Power is on\n")).toBe("power on");
    expect(() => parsePowerStatus("garbage")).toThrow(/unexpected/);
    const param =
      " - Options apply to all future boots\n - Boot Device Selector : Force Boot from default Hard-Drive\n";
    expect(parseBootParam(param)).toEqual({ boot_device: "disk", persistent: true });
    expect(parseBootParam(" - Boot Device Selector : No override\n")).toEqual({
      boot_device: null,
      persistent: null,
    });
  });
});
