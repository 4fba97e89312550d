import { connect, type Socket } from "node:net";
import { z } from "zod";
import type { ConsoleConnection, ConsoleInterface, ConsoleSink } from "../console/console.ts";
import { escapeTelnet, TelnetFilter } from "../console/telnet.ts";
import { DriverError } from "../errors.ts";
import type { DriverNode } from "../out-of-band.ts";
import type { RedfishConnections } from "./client.ts";
import { parseRedfishDriverInfo } from "./driver-info.ts";
import { managerSerialConsole, systemSerialConsole, type SerialConsoleChoice } from "./serial-console.ts";
import { loadSystem, managerPathOf, type SystemView } from "./system.ts";

/** A BMC that does not accept the Telnet connection within this is treated as refusing it. */
const CONNECT_TIMEOUT_MS = 10_000;
/** Keystrokes waiting for the BMC to take them, at most (as for ipmitool: a flooding viewer is cut short). */
const MAX_PENDING_INPUT_BYTES = 64 * 1024;
/** A connection asked to close gets this long to finish, then it is destroyed. */
const CLOSE_GRACE_MS = 2000;

const AnyResource = z.looseObject({});

/** The System's console, or its first Manager's where the System advertises none. @throws RedfishError */
async function consoleChoice(view: SystemView): Promise<SerialConsoleChoice> {
  const own = systemSerialConsole(view.system);
  if (own !== undefined) return own;
  const manager = managerPathOf(view.system);
  if (manager === undefined) return managerSerialConsole(undefined);
  return managerSerialConsole(await view.client.get(manager, AnyResource));
}

/** The BMC's host as net.connect wants it (an IPv6 literal without its brackets). */
function hostOf(origin: string): string {
  return new URL(origin).hostname.replace(/^\[(.*)\]$/, "$1");
}

function connectTo(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, timeout: CONNECT_TIMEOUT_MS });
    const fail = (reason: string) => {
      socket.destroy();
      reject(new DriverError(`the BMC's Telnet serial console at ${host}:${port} ${reason}`, true));
    };
    socket.once("timeout", () => fail(`did not answer within ${CONNECT_TIMEOUT_MS / 1000} s`));
    socket.once("error", (error) => fail(`refused the connection: ${error.message}`));
    socket.once("connect", () => {
      socket.removeAllListeners("timeout").removeAllListeners("error");
      socket.setTimeout(0);
      socket.setNoDelay(true);
      socket.setKeepAlive(true, 30_000);
      resolve(socket);
    });
  });
}

/**
 * The redfish hardware type's serial console (Ironic has only the graphical redfish-graphical): reads where the
 * BMC serves the System's serial console from Redfish (ComputerSystem.SerialConsole, else the Manager's),
 * opens its Telnet port on the BMC's host, and relays bytes with Telnet's commands taken out and every
 * option refused. A BMC that offers only IPMI Serial-over-LAN (or SSH) is named as such in the error.
 * No credential travels on the Telnet connection: the BMC is trusted to serve it to its management network.
 */
export class RedfishSerialConsole implements ConsoleInterface {
  readonly name = "redfish-serial";

  constructor(private readonly options: { connections: RedfishConnections }) {}

  validate(node: DriverNode): void {
    parseRedfishDriverInfo(node.driver_info);
  }

  /** @throws InvalidDriverInfo, RedfishError, DriverError (no Telnet console, or it refused the connection) */
  async open(node: DriverNode, sink: ConsoleSink): Promise<ConsoleConnection> {
    const info = parseRedfishDriverInfo(node.driver_info);
    const view = await loadSystem(this.options.connections, node);
    const choice = await consoleChoice(view);
    if (choice.kind === "none")
      throw new DriverError(
        `The Redfish system ${view.path} has no serial console redfish-serial can open: ${choice.reason}.`,
      );
    const host = hostOf(info.origin);
    const socket = await connectTo(host, choice.port);
    const filter = new TelnetFilter();
    let closing = false;
    let why = "";
    socket.on("data", (chunk: Buffer) => {
      const { data, reply } = filter.push(chunk);
      if (reply.length > 0 && socket.writable) socket.write(reply);
      if (data.length > 0) sink.data(data);
    });
    socket.on("error", (error) => {
      why = error.message;
    });
    const closed = new Promise<void>((resolve) => {
      socket.once("close", () => {
        resolve();
        if (!closing)
          sink.closed(
            `the BMC closed the Telnet serial console at ${host}:${choice.port}${why ? `: ${why}` : ""}`,
          );
      });
    });
    return {
      write: (chunk) => {
        if (closing || !socket.writable) return;
        const bytes = escapeTelnet(chunk);
        if (socket.writableLength + bytes.length > MAX_PENDING_INPUT_BYTES) return;
        socket.write(bytes);
      },
      close: async () => {
        if (closing) return closed;
        closing = true;
        socket.end();
        const kill = setTimeout(() => socket.destroy(), CLOSE_GRACE_MS);
        await closed;
        clearTimeout(kill);
      },
    };
  }
}
