import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { escapeTelnet, TelnetFilter } from "../../../conductor/drivers/console/telnet.ts";

/** Where a machine's serial port is reached: QEMU's chardev socket (a unix path) or a TCP peer (tests). */
export type SerialEndpoint = { path: string } | { host: string; port: number };

// what BMCs' Telnet consoles send first: "I echo, I suppress go-ahead" (the client refuses or accepts)
const GREETING = Buffer.from([0xff, 0xfb, 0x01, 0xff, 0xfb, 0x03]);
/**
 * While the machine's serial port is not there (QEMU off or restarting), it is dialled again this often (a
 * missing unix socket fails at once, so this is cheap). NOTE: what QEMU prints before the line is back is in
 * serial.log but not on the console: with 250 ms, SeaBIOS's first two lines were lost after a restart.
 */
const REDIAL_MS = 50;

export interface TelnetSerialOptions {
  /** The machine's serial port now (undefined: the machine has none). */
  endpoint(): SerialEndpoint | undefined;
  /** Sessions admitted at once; a further one is told so and closed. */
  maxSessions: number;
  host?: string;
}

/**
 * The lab BMC's serial console service, as a BMC's Telnet SOL port: it listens whatever the host's power (a
 * BMC's service does not go away with the host), and while a session is open it holds one connection to the
 * machine's serial port (QEMU's chardev socket, which takes one client), redialling it across power cycles.
 * Output goes to every session, Telnet-escaped; what a session types goes to the port, Telnet commands out.
 */
export class TelnetSerialService {
  private server: Server | undefined;
  private readonly sessions = new Set<Socket>();
  private upstream: Socket | undefined;
  private dialling = false;
  private redial: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly options: TelnetSerialOptions) {}

  /** Listens on loopback (an ephemeral port); resolves with the port. */
  async start(): Promise<number> {
    const server = createServer((socket) => this.accept(socket));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, this.options.host ?? "127.0.0.1", () => resolve());
    });
    return (server.address() as AddressInfo).port;
  }

  /** Sessions open now (tests read it). */
  get sessionCount(): number {
    return this.sessions.size;
  }

  private accept(socket: Socket): void {
    socket.on("error", () => undefined);
    if (this.stopped || this.sessions.size >= this.options.maxSessions) {
      socket.end(`\r\n[lab BMC: the serial console admits ${this.options.maxSessions} session(s)]\r\n`);
      return;
    }
    this.sessions.add(socket);
    socket.setNoDelay(true);
    socket.write(GREETING);
    const filter = new TelnetFilter();
    socket.on("data", (chunk: Buffer) => {
      const { data, reply } = filter.push(chunk);
      if (reply.length > 0) socket.write(reply);
      if (data.length > 0 && this.upstream?.writable) this.upstream.write(data);
    });
    socket.on("close", () => {
      this.sessions.delete(socket);
      if (this.sessions.size === 0) this.hangUp();
    });
    this.dial();
  }

  private dial(): void {
    if (this.stopped || this.upstream || this.dialling || this.sessions.size === 0) return;
    const endpoint = this.options.endpoint();
    if (endpoint === undefined) return;
    this.dialling = true;
    const port = connect(endpoint);
    port.on("error", () => undefined);
    port.once("connect", () => {
      this.dialling = false;
      if (this.sessions.size === 0 || this.stopped) return void port.destroy();
      this.upstream = port;
      port.on("data", (chunk: Buffer) => {
        const escaped = escapeTelnet(chunk);
        for (const session of this.sessions) session.write(escaped);
      });
    });
    port.once("close", () => {
      this.dialling = false;
      if (this.upstream === port) this.upstream = undefined;
      if (this.sessions.size === 0 || this.stopped) return;
      this.redial = setTimeout(() => this.dial(), REDIAL_MS);
      this.redial.unref();
    });
  }

  private hangUp(): void {
    clearTimeout(this.redial);
    this.upstream?.destroy();
    this.upstream = undefined;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.hangUp();
    for (const session of this.sessions) session.destroy();
    this.sessions.clear();
    const server = this.server;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
