import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "../../shared/log.ts";
import { silentLogger } from "../../shared/log.ts";
import type { ConsoleConnection, ConsoleInterface } from "../drivers/console/console.ts";
import type { DriverNode } from "../drivers/interfaces.ts";
import { Scrollback } from "./scrollback.ts";

/** Someone watching a console (a WebSocket): gets output, and is told when the console goes away. */
export interface ConsoleViewer {
  send(chunk: Buffer): void;
  end(reason: string): void;
}

/** A viewer's handle on the console it attached to. */
export interface ConsoleAttachment {
  /** Keystrokes for the node's serial port (dropped while the connection is being reopened). */
  write(chunk: Buffer): void;
  detach(): void;
}

export interface ConsoleSessionsOptions {
  logger?: Logger;
  /** Bytes of output kept for a viewer who attaches later. Default 64 KiB. */
  scrollbackBytes?: number;
  /** Pause before reopening a connection that dropped, by consecutive failure (0, 1, ...). */
  reopenDelayMs?: (failures: number) => number;
  /** Viewers one console admits at once. Default 8. */
  maxViewers?: number;
}

/** 1 s, 2 s, 4 s ... up to 30 s: a BMC that refuses SOL is not hammered, a dropped session comes back fast. */
export function defaultReopenDelayMs(failures: number): number {
  return Math.min(30_000, 1000 * 2 ** Math.min(failures, 5));
}

class Session {
  readonly scrollback: Scrollback;
  readonly viewers = new Set<ConsoleViewer>();
  private connection: ConsoleConnection | undefined;
  private readonly stopper = new AbortController();
  private failures = 0;
  private loop: Promise<void> = Promise.resolve();

  readonly uuid: string;
  private readonly console: ConsoleInterface;
  private readonly node: DriverNode;

  constructor(
    target: { uuid: string; console: ConsoleInterface; node: DriverNode },
    private readonly options: Required<Omit<ConsoleSessionsOptions, "logger">> & { logger: Logger },
  ) {
    this.uuid = target.uuid;
    this.console = target.console;
    this.node = target.node;
    this.scrollback = new Scrollback(options.scrollbackBytes);
  }

  get stopped(): boolean {
    return this.stopper.signal.aborted;
  }

  /** Opens the first connection; resolves once it is open. @throws what the console's open throws */
  async start(): Promise<void> {
    this.connection = await this.console.open(this.node, this.sinkFor());
  }

  private sinkFor() {
    let live = true;
    return {
      data: (chunk: Buffer) => {
        if (!live || this.stopped) return;
        this.failures = 0;
        this.output(chunk);
      },
      closed: (reason: string) => {
        if (!live || this.stopped) return;
        live = false;
        this.connection = undefined;
        this.loop = this.reopen(reason);
      },
    };
  }

  private output(chunk: Buffer): void {
    this.scrollback.append(chunk);
    for (const viewer of this.viewers) viewer.send(chunk);
  }

  /** The connection dropped while the console is enabled: say so to viewers, wait, open it again. */
  private async reopen(reason: string): Promise<void> {
    const log = this.options.logger.child({ node: this.uuid });
    for (;;) {
      const delay = this.options.reopenDelayMs(this.failures++);
      log.warn({ reason, retry_ms: delay }, "console connection lost; reopening");
      this.output(Buffer.from(`\r\n[anvil: console connection lost (${reason}); reopening]\r\n`));
      try {
        await sleep(delay, undefined, { signal: this.stopper.signal });
        const connection = await this.console.open(this.node, this.sinkFor());
        if (this.stopped) return void (await connection.close());
        this.connection = connection;
        return;
      } catch (error) {
        if (this.stopped) return;
        reason = error instanceof Error ? error.message : String(error);
      }
    }
  }

  write(chunk: Buffer): void {
    this.connection?.write(chunk);
  }

  async stop(reason: string): Promise<void> {
    this.stopper.abort();
    for (const viewer of this.viewers) viewer.end(reason);
    this.viewers.clear();
    await this.loop;
    const connection = this.connection;
    this.connection = undefined;
    await connection?.close();
  }
}

/**
 * The serial consoles this conductor runs: one session per enabled node it owns, holding one connection (an
 * ipmitool SOL process) open, reopening it when it drops, keeping a bounded scrollback and fanning output out
 * to viewers. Ironic's console subprocesses, owned by the conductor that enabled them.
 */
export class ConsoleSessions {
  private readonly sessions = new Map<string, Session>();
  private readonly options: Required<Omit<ConsoleSessionsOptions, "logger">> & { logger: Logger };

  constructor(options: ConsoleSessionsOptions = {}) {
    this.options = {
      logger: options.logger ?? silentLogger,
      scrollbackBytes: options.scrollbackBytes ?? 64 * 1024,
      reopenDelayMs: options.reopenDelayMs ?? defaultReopenDelayMs,
      maxViewers: options.maxViewers ?? 8,
    };
  }

  /** True when a session for the node runs here. */
  has(uuid: string): boolean {
    return this.sessions.has(uuid);
  }

  /** The nodes whose console runs here. */
  nodes(): string[] {
    return [...this.sessions.keys()];
  }

  /**
   * Starts the node's console (a running one is replaced: driver_info may have changed). Resolves once the
   * first connection is open. @throws what the console's open throws (nothing is left running then)
   */
  async start(uuid: string, console: ConsoleInterface, node: DriverNode): Promise<void> {
    await this.stop(uuid, "console restarted");
    const session = new Session({ uuid, console, node }, this.options);
    await session.start();
    this.sessions.set(uuid, session);
  }

  /** Stops the node's console, if it runs here; its viewers are told why. */
  async stop(uuid: string, reason = "console disabled"): Promise<void> {
    const session = this.sessions.get(uuid);
    if (session === undefined) return;
    this.sessions.delete(uuid);
    await session.stop(reason);
  }

  /** Stops every console (the conductor stops). */
  async stopAll(reason = "conductor stopping"): Promise<void> {
    await Promise.all(this.nodes().map((uuid) => this.stop(uuid, reason)));
  }

  /**
   * Attaches a viewer: it gets the scrollback first, then live output. Undefined when no session runs here or
   * the session has its maximum of viewers.
   */
  attach(uuid: string, viewer: ConsoleViewer): ConsoleAttachment | undefined {
    const session = this.sessions.get(uuid);
    if (session === undefined || session.viewers.size >= this.options.maxViewers) return undefined;
    const kept = session.scrollback.contents();
    if (kept.length > 0) viewer.send(kept);
    session.viewers.add(viewer);
    return {
      write: (chunk) => session.write(chunk),
      detach: () => void session.viewers.delete(viewer),
    };
  }
}
