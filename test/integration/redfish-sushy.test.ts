import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryMachine } from "../../scripts/lab/redfish/machine.ts";
import { startRedfishBmc, type RedfishBmc } from "../../scripts/lab/redfish/server.ts";

const run = promisify(execFile);

// Debian's python3-sushy (the library Ironic's redfish driver is built on) as the conformance client
const SCRIPT = `
import json, sys, sushy
from sushy import auth
v = lambda x: getattr(x, "value", x)
conn = sushy.Sushy(sys.argv[1] + "/redfish/v1", auth=auth.SessionOrBasicAuth(username="admin", password=sys.argv[2]))
system = conn.get_system("/redfish/v1/Systems/node-1")
out = {"reset_types": sorted(v(t) for t in system.get_allowed_reset_system_values())}
out["power0"] = v(system.power_state)
system.reset_system(sushy.RESET_ON)
system.refresh()
out["power_on"] = v(system.power_state)
system.reset_system(sushy.RESET_FORCE_RESTART)
system.refresh()
out["after_restart"] = v(system.power_state)
system.reset_system(sushy.RESET_FORCE_OFF)
system.refresh()
out["power_off"] = v(system.power_state)
system.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_PXE, enabled=sushy.BOOT_SOURCE_ENABLED_CONTINUOUS, mode=sushy.BOOT_SOURCE_MODE_BIOS)
system.refresh()
out["boot"] = [v(system.boot.target), v(system.boot.enabled), v(system.boot.mode)]
mgr = conn.get_manager("/redfish/v1/Managers/BMC")
vm = mgr.virtual_media.get_member("/redfish/v1/Managers/BMC/VirtualMedia/node-1")
vm.insert_media("http://127.0.0.1:9/deploy.iso", inserted=True, write_protected=True)
vm.refresh()
out["inserted"] = [vm.image, vm.inserted]
vm.eject_media()
vm.refresh()
out["ejected"] = [vm.image, vm.inserted]
sc = mgr.serial_console
out["serial_console"] = [sc.service_enabled, sc.max_concurrent_sessions, sorted(v(t) for t in mgr.get_supported_serial_console_types())]
print(json.dumps(out))
`;

describe("python3-sushy against the lab's Redfish BMC", () => {
  let bmc: RedfishBmc;
  const machine = new MemoryMachine();
  beforeAll(async () => {
    bmc = await startRedfishBmc({ systems: [{ id: "node-1", machine }], password: "lab-s3cret" });
  });
  afterAll(async () => {
    await bmc.stop();
  });

  it("powers, resets, overrides the boot source and inserts and ejects virtual media", async () => {
    const { stdout } = await run("/usr/bin/python3", ["-c", SCRIPT, bmc.url, "lab-s3cret"], {
      env: { ...process.env, NO_PROXY: "127.0.0.1", no_proxy: "127.0.0.1" },
      timeout: 60_000,
    });
    const out = JSON.parse(stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
    expect(out).toEqual({
      reset_types: [
        "ForceOff",
        "ForceOn",
        "ForceRestart",
        "GracefulRestart",
        "GracefulShutdown",
        "Nmi",
        "On",
      ],
      power0: "Off",
      power_on: "On",
      after_restart: "On",
      power_off: "Off",
      boot: ["Pxe", "Continuous", "Legacy"],
      inserted: ["http://127.0.0.1:9/deploy.iso", true],
      ejected: [null, false],
      // the Manager's SerialConsole as sushy reads it: the System's Telnet console, two sessions
      serial_console: [true, 2, ["Telnet"]],
    });
    expect(machine.log.map((l) => l.type)).toEqual(["On", "ForceRestart", "ForceOff"]);
    // sushy logged in with a session (SessionOrBasicAuth), as Ironic does
    expect(bmc.requests).toContain("POST /redfish/v1/SessionService/Sessions");
    expect(bmc.systems.get("node-1")!.boot).toEqual({ target: "Pxe", enabled: "Continuous", mode: "Legacy" });
  });
});
