import { z } from "zod";

/**
 * Where a Redfish BMC serves a system's serial console, read from what it advertises: ComputerSystem's
 * SerialConsole (v1_13: one object per protocol with ServiceEnabled and Port) or, where a BMC has only the
 * older form, its Manager's SerialConsole (ConnectTypesSupported, no port: Telnet's own 23). Only Telnet is
 * spoken by redfish-serial; the other answers say what the BMC offers instead, so an operator is not told
 * "connection refused" about a BMC that only has IPMI Serial-over-LAN.
 */

const text = z.string().max(1024);
const protocol = z.looseObject({
  ServiceEnabled: z.boolean().nullable().optional(),
  Port: z.number().int().min(1).max(65_535).nullable().optional(),
  SharedWithManagerCLI: z.boolean().nullable().optional(),
});

/** ComputerSystem.SerialConsole (HostSerialConsole, ComputerSystem v1_13). */
export const HostSerialConsoleSchema = z.looseObject({
  MaxConcurrentSessions: z.number().int().nonnegative().max(1e6).nullable().optional(),
  Telnet: protocol.optional(),
  SSH: protocol.optional(),
  IPMI: protocol.optional(),
});

/** Manager.SerialConsole (SerialConsole, what sushy reads). */
export const ManagerSerialConsoleSchema = z.looseObject({
  ServiceEnabled: z.boolean().nullable().optional(),
  MaxConcurrentSessions: z.number().int().nonnegative().max(1e6).nullable().optional(),
  ConnectTypesSupported: z.array(text).max(16).nullable().optional(),
});

/** The port Telnet listens on when a BMC names none (RFC 854). */
export const TELNET_PORT = 23;

export type SerialConsoleChoice = { kind: "telnet"; port: number } | { kind: "none"; reason: string };

const IPMI_HINT =
  "only as IPMI Serial-over-LAN; enroll the node with the ipmi hardware type and console_interface " +
  "ipmitool-socat to use it";

function offered(names: string[]): string {
  return names.length === 0 ? "" : ` (it offers ${names.join(" and ")}, which redfish-serial does not speak)`;
}

/**
 * The console a System advertises, from its own SerialConsole. Undefined when the System has none (then the
 * Manager's may say), a `none` choice with the reason when it has one without a usable Telnet. Pure.
 */
export function systemSerialConsole(system: unknown): SerialConsoleChoice | undefined {
  const raw = (system as { SerialConsole?: unknown } | null)?.SerialConsole;
  if (raw === undefined || raw === null) return undefined;
  const parsed = HostSerialConsoleSchema.safeParse(raw);
  if (!parsed.success)
    return { kind: "none", reason: "its SerialConsole is malformed (not ComputerSystem v1_13's shape)" };
  const { Telnet, SSH, IPMI } = parsed.data;
  if (Telnet?.ServiceEnabled === true) {
    // NOTE: a console shared with the BMC's own CLI wants a login and a ConsoleEntryCommand first;
    // redfish-serial relays bytes and logs in to nothing
    if (Telnet.SharedWithManagerCLI === true)
      return {
        kind: "none",
        reason:
          "its Telnet serial console is shared with the BMC's command line (a login and ConsoleEntryCommand first), which redfish-serial does not do",
      };
    return { kind: "telnet", port: Telnet.Port ?? TELNET_PORT };
  }
  const ipmi = IPMI?.ServiceEnabled === true;
  const ssh = SSH?.ServiceEnabled === true;
  if (ipmi && !ssh) return { kind: "none", reason: `it offers its serial console ${IPMI_HINT}` };
  if (ssh)
    return {
      kind: "none",
      reason: `its serial console has no Telnet service enabled${offered(["SSH", ...(ipmi ? ["IPMI Serial-over-LAN"] : [])])}`,
    };
  return { kind: "none", reason: "its SerialConsole has no service enabled (Telnet, SSH and IPMI all off)" };
}

/** The console a Manager advertises (ConnectTypesSupported; Telnet on its standard port). Pure. */
export function managerSerialConsole(manager: unknown): SerialConsoleChoice {
  const raw = (manager as { SerialConsole?: unknown } | null)?.SerialConsole;
  const parsed = ManagerSerialConsoleSchema.safeParse(raw ?? {});
  if (raw === undefined || raw === null || !parsed.success)
    return {
      kind: "none",
      reason: "it advertises no serial console (no SerialConsole on the System or its Manager)",
    };
  const { ServiceEnabled, ConnectTypesSupported } = parsed.data;
  const types = ConnectTypesSupported ?? [];
  if (ServiceEnabled === false)
    return {
      kind: "none",
      reason: "its Manager's serial console service is disabled (SerialConsole.ServiceEnabled false)",
    };
  if (types.includes("Telnet")) return { kind: "telnet", port: TELNET_PORT };
  if (types.includes("IPMI") && !types.includes("SSH"))
    return { kind: "none", reason: `it offers its serial console ${IPMI_HINT}` };
  const others = types.filter((t) => t !== "Telnet").map((t) => (t === "IPMI" ? "IPMI Serial-over-LAN" : t));
  return { kind: "none", reason: `its Manager lists no Telnet serial console${offered(others)}` };
}
