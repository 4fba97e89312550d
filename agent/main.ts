import { readFile, rm, writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { createLogger } from "../shared/log.ts";
import { LogRing } from "./link/log-ring.ts";
import type { Logger } from "../shared/log.ts";
import { InventorySchema } from "../shared/inventory.ts";
import { kernelParamValues, parseKernelCmdline, PIN_PARAM, pinFromValues } from "./cmdline.ts";
import { COMMANDS } from "./commands/registry.ts";
import type { HardwareBackend } from "./hardware/backend.ts";
import { LinuxBackend } from "./hardware/linux/linux-backend.ts";
import { DEFAULT_LLDP_TIMEOUT_S, lldpTimeoutOf, lldpTimeoutParam } from "./hardware/linux/lldp.ts";
import { SimulatedBackend } from "./hardware/simulated/simulated-backend.ts";
import { AgentLink } from "./link/client.ts";
import { linuxRunner } from "./network/apply.ts";
import { netconfig } from "./network/netconfig.ts";
import { checkConductorSchemes, parseConductorUrls } from "./link/endpoints.ts";

const USAGE = `usage:
  anvil-agent inspect [--backend linux|simulated] [--inventory FILE]
  anvil-agent netconfig --network-data FILE [--dry-run] [--resolv-conf FILE]
  anvil-agent [service] [--conductor ws://HOST:PORT/v1/agent] [--backend linux|simulated] [--inventory FILE]
                        [--events FILE] [--token-file FILE] [--log-level info]
The conductor URL defaults to the kernel parameter anvil.conductor=; either may be a comma-separated list
(the agent tries the others when one cannot be reached). The certificate pin (--ca-fingerprint,
SHA-256 of the conductor's CA or certificate) to anvil.ca_fingerprint=; with a pin, wss:// trusts nothing else,
every conductor URL must be wss://, and an empty, malformed or conflicting pin stops the agent.
--token-file keeps the agent token across agent restarts within one boot; put it on a tmpfs (e.g. /run)
so that a reboot forgets it, as the conductor expects.
netconfig configures the links, addresses, routes and DNS of OpenStack's network_data.json (the ramdisk's
no-DHCP path) and exits non-zero with one line naming the problem when it cannot.`;

/** Set by the build (esbuild define); "dev" when run from source. */
const AGENT_VERSION = process.env.ANVIL_AGENT_VERSION ?? "0.0.0-dev";

const OPTIONS = {
  backend: { type: "string", default: "linux" },
  inventory: { type: "string" },
  conductor: { type: "string" },
  events: { type: "string" },
  "token-file": { type: "string" },
  "ca-fingerprint": { type: "string", multiple: true },
  "log-level": { type: "string", default: "info" },
  "network-data": { type: "string" },
  "resolv-conf": { type: "string", default: "/etc/resolv.conf" },
  "dry-run": { type: "boolean", default: false },
  version: { type: "boolean", default: false },
  help: { type: "boolean", short: "h", default: false },
} as const;

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    args: process.argv.slice(2),
    options: OPTIONS,
    allowPositionals: true,
  });
  if (values.help) return usage(0);
  if (values.version) {
    process.stdout.write(`${AGENT_VERSION}\n`);
    return 0;
  }
  const mode = positionals[0] ?? "service";
  if (mode === "netconfig") {
    if (values["network-data"] === undefined) return usage(2);
    return netconfig({
      networkData: values["network-data"],
      resolvConf: values["resolv-conf"],
      dryRun: values["dry-run"],
      sys: "/sys",
      procSys: "/proc/sys",
      dhcpScript: "/etc/anvil/udhcpc.script",
      runner: linuxRunner,
      out: (line) => process.stdout.write(`anvil-agent netconfig: ${line}\n`),
    });
  }
  const cmdlineText = await readFile("/proc/cmdline", "utf8").catch(() => "");
  const cmdline = parseKernelCmdline(cmdlineText);
  const backend = await createBackend({
    kind: values.backend,
    inventory: values.inventory,
    events: values.events,
    bootif: cmdline.get("BOOTIF") ?? null,
    lldpTimeout: lldpTimeoutParam(cmdline),
  });
  switch (mode) {
    case "inspect": {
      const inventory = InventorySchema.parse(await backend.inventory());
      process.stdout.write(JSON.stringify(inventory, null, 2) + "\n");
      return 0;
    }
    case "service": {
      // before anything is dialled: a pin that is there but unusable stops the agent (pinFromValues throws)
      const pins = values["ca-fingerprint"] ?? kernelParamValues(cmdlineText, PIN_PARAM);
      return runService({
        backend,
        url: values.conductor ?? cmdline.get("anvil.conductor"),
        level: values["log-level"],
        tokenFile: values["token-file"],
        pinnedFingerprint: pinFromValues(pins),
      });
    }
    default:
      return usage(2);
  }
}

/** anvil.lldp_timeout's (or ipa-lldp-timeout's) seconds; a malformed value is reported and the default kept (LLDP is optional). */
function lldpTimeout(value: string | undefined): number | null {
  try {
    return lldpTimeoutOf(value);
  } catch (error) {
    process.stderr.write(`anvil-agent: ${(error as Error).message}; using ${DEFAULT_LLDP_TIMEOUT_S} s\n`);
    return DEFAULT_LLDP_TIMEOUT_S;
  }
}

async function createBackend(options: {
  kind: string;
  inventory: string | undefined;
  events: string | undefined;
  bootif: string | null;
  lldpTimeout: string | undefined;
}): Promise<HardwareBackend> {
  switch (options.kind) {
    case "linux":
      return new LinuxBackend({
        pxeInterface: options.bootif,
        lldpTimeoutS: lldpTimeout(options.lldpTimeout),
      });
    case "simulated":
      if (options.inventory === undefined) throw new Error("--backend simulated needs --inventory FILE");
      return SimulatedBackend.fromFile(options.inventory, { eventsFile: options.events });
    default:
      throw new Error(`unknown backend ${JSON.stringify(options.kind)} (linux | simulated)`);
  }
}

async function runService(options: {
  backend: HardwareBackend;
  url: string | undefined;
  level: string;
  tokenFile: string | undefined;
  pinnedFingerprint: string | undefined;
}): Promise<number> {
  if (options.url === undefined || options.url === "") {
    process.stderr.write("no conductor URL: pass --conductor or boot with anvil.conductor=ws://…\n");
    return 2;
  }
  const recent = new LogRing();
  const logger = createLogger({ level: options.level, name: "anvil-agent", tee: recent });
  const [url, ...otherUrls] = parseConductorUrls(options.url);
  if (url === undefined) {
    process.stderr.write("no conductor URL: pass --conductor or boot with anvil.conductor=ws://…\n");
    return 2;
  }
  checkConductorSchemes([url, ...otherUrls], options.pinnedFingerprint !== undefined);
  const link = new AgentLink({
    url,
    otherUrls,
    backend: options.backend,
    commands: COMMANDS,
    logger,
    agentVersion: AGENT_VERSION,
    pinnedFingerprint: options.pinnedFingerprint,
    recentLog: () => recent.text(),
    ...(await tokenPersistence(options.tokenFile, logger)),
  });
  logger.info(
    { conductor: [url, ...otherUrls], backend: options.backend.name, version: AGENT_VERSION },
    "agent starting",
  );
  link.start();
  await new Promise<void>((resolve) => {
    process.once("SIGTERM", resolve);
    process.once("SIGINT", resolve);
  });
  await link.stop();
  return 0;
}

/** Reads a kept token and returns the hook that keeps the next one (mode 0600; never logged). */
async function tokenPersistence(
  file: string | undefined,
  logger: Logger,
): Promise<{ initialToken?: string; onTokenChange?: (token: string | undefined) => void }> {
  if (file === undefined) return {};
  const kept = (await readFile(file, "utf8").catch(() => "")).trim();
  const onTokenChange = (token: string | undefined): void => {
    const write = token === undefined ? rm(file, { force: true }) : writeFile(file, token, { mode: 0o600 });
    write.catch((error: unknown) =>
      logger.warn(
        { file, err: error instanceof Error ? error.message : String(error) },
        "cannot keep the token",
      ),
    );
  };
  return kept === "" ? { onTokenChange } : { initialToken: kept, onTokenChange };
}

function usage(code: number): number {
  (code === 0 ? process.stdout : process.stderr).write(USAGE + "\n");
  return code;
}

// NOTE: a function, not top-level await: the single executable is a CommonJS bundle.
main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`anvil-agent: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
