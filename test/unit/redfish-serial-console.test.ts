import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  managerSerialConsole,
  systemSerialConsole,
  TELNET_PORT,
} from "../../conductor/drivers/redfish/serial-console.ts";

// Answers in the shapes BMCs write (fields as DMTF's ComputerSystem v1_13 and Manager schemas name them)
const OPENBMC_SYSTEM = {
  "@odata.type": "#ComputerSystem.v1_16_0.ComputerSystem",
  SerialConsole: {
    IPMI: { ServiceEnabled: true },
    MaxConcurrentSessions: 15,
    SSH: { HotKeySequenceDisplay: "Press ~. to exit console", Port: 2200, ServiceEnabled: true },
  },
};
const IPMI_ONLY_SYSTEM = {
  SerialConsole: {
    MaxConcurrentSessions: 1,
    IPMI: { ServiceEnabled: true, Port: 623 },
    SSH: { ServiceEnabled: false },
    Telnet: { ServiceEnabled: false },
  },
};
const LAB_SYSTEM = {
  SerialConsole: {
    MaxConcurrentSessions: 2,
    Telnet: { ServiceEnabled: true, Port: 40123, SharedWithManagerCLI: false },
    SSH: { ServiceEnabled: false },
    IPMI: { ServiceEnabled: false },
  },
};
const IDRAC_MANAGER = {
  "@odata.type": "#Manager.v1_17_0.Manager",
  SerialConsole: { ConnectTypesSupported: ["SSH", "IPMI"], MaxConcurrentSessions: 5, ServiceEnabled: true },
};

describe("where a Redfish BMC serves a system's serial console", () => {
  it("takes the System's Telnet service and its port", () => {
    expect(systemSerialConsole(LAB_SYSTEM)).toEqual({ kind: "telnet", port: 40123 });
  });

  it("uses Telnet's own port where an enabled Telnet names none", () => {
    expect(systemSerialConsole({ SerialConsole: { Telnet: { ServiceEnabled: true } } })).toEqual({
      kind: "telnet",
      port: TELNET_PORT,
    });
  });

  it("says a BMC offers only IPMI Serial-over-LAN, and what to use instead", () => {
    const choice = systemSerialConsole(IPMI_ONLY_SYSTEM);
    expect(choice?.kind).toBe("none");
    expect(choice).toMatchObject({
      reason: expect.stringMatching(/only as IPMI Serial-over-LAN.*ipmitool-socat/),
    });
  });

  it("names SSH (and IPMI) where a BMC has no Telnet (OpenBMC)", () => {
    expect(systemSerialConsole(OPENBMC_SYSTEM)).toEqual({
      kind: "none",
      reason: expect.stringMatching(/no Telnet service enabled \(it offers SSH and IPMI Serial-over-LAN/),
    });
  });

  it("refuses a Telnet console shared with the BMC's command line (it would need a login)", () => {
    const shared = {
      SerialConsole: { Telnet: { ServiceEnabled: true, Port: 23, SharedWithManagerCLI: true } },
    };
    expect(systemSerialConsole(shared)).toMatchObject({
      kind: "none",
      reason: expect.stringMatching(/command line/),
    });
  });

  it("leaves a System without SerialConsole to its Manager", () => {
    expect(systemSerialConsole({ Id: "1" })).toBeUndefined();
    expect(systemSerialConsole({ SerialConsole: null })).toBeUndefined();
  });

  it("reports a malformed SerialConsole instead of guessing", () => {
    expect(
      systemSerialConsole({ SerialConsole: { Telnet: { ServiceEnabled: true, Port: "23" } } }),
    ).toMatchObject({
      kind: "none",
      reason: expect.stringMatching(/malformed/),
    });
  });

  it("reads the Manager's ConnectTypesSupported: iDRAC's SSH and IPMI, a Telnet one, a disabled one", () => {
    expect(managerSerialConsole(IDRAC_MANAGER)).toMatchObject({
      kind: "none",
      reason: expect.stringMatching(/no Telnet serial console \(it offers SSH and IPMI Serial-over-LAN/),
    });
    const telnet = { SerialConsole: { ServiceEnabled: true, ConnectTypesSupported: ["Telnet", "IPMI"] } };
    expect(managerSerialConsole(telnet)).toEqual({ kind: "telnet", port: TELNET_PORT });
    expect(
      managerSerialConsole({ SerialConsole: { ServiceEnabled: false, ConnectTypesSupported: ["Telnet"] } }),
    ).toMatchObject({ kind: "none", reason: expect.stringMatching(/disabled/) });
    expect(managerSerialConsole({ SerialConsole: { ConnectTypesSupported: ["IPMI"] } })).toMatchObject({
      reason: expect.stringMatching(/only as IPMI Serial-over-LAN/),
    });
    expect(managerSerialConsole(undefined)).toMatchObject({
      kind: "none",
      reason: expect.stringMatching(/advertises no serial console/),
    });
  });

  it("never throws on whatever a BMC answers, and opens Telnet only where it is enabled", () => {
    const protocol = fc.record(
      { ServiceEnabled: fc.oneof(fc.boolean(), fc.constant(null), fc.string()), Port: fc.jsonValue() },
      { requiredKeys: [] },
    );
    const serialConsole = fc.oneof(
      fc.jsonValue(),
      fc.record(
        { Telnet: protocol, SSH: protocol, IPMI: protocol, MaxConcurrentSessions: fc.jsonValue() },
        {
          requiredKeys: [],
        },
      ),
    );
    fc.assert(
      fc.property(serialConsole, fc.jsonValue(), (console_, manager) => {
        const system = { SerialConsole: console_ };
        const own = systemSerialConsole(system);
        const telnet = (console_ as { Telnet?: { ServiceEnabled?: unknown; Port?: unknown } } | null)?.Telnet;
        if (own?.kind === "telnet") {
          expect(telnet?.ServiceEnabled).toBe(true);
          expect(own.port).toBe(telnet?.Port ?? TELNET_PORT);
        }
        const fromManager = managerSerialConsole(manager);
        expect(["telnet", "none"]).toContain(fromManager.kind);
      }),
      { numRuns: 500 },
    );
  });
});
