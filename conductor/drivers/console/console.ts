import type { DriverNode } from "../out-of-band.ts";

/** Where a console connection's output and its end go. */
export interface ConsoleSink {
  /** Bytes the node's serial port sent. */
  data(chunk: Buffer): void;
  /** The connection ended (the process died, the BMC dropped the session): `reason` says why. */
  closed(reason: string): void;
}

/** One open connection to a node's serial console (an `ipmitool sol activate`, a fake loop). */
export interface ConsoleConnection {
  /** Sends keystrokes to the node's serial port. */
  write(chunk: Buffer): void;
  /** Ends the connection; resolves once it is gone (the sink's `closed` is not called for it). */
  close(): Promise<void>;
}

/**
 * A node's serial console (Ironic's ConsoleInterface): `validate` checks driver_info, `open` starts one
 * connection whose bytes go to the sink. The conductor's console sessions keep the connection open while the
 * console is enabled, reopen it when it drops, and fan its output out to viewers.
 */
export interface ConsoleInterface {
  name: string;
  /** @throws InvalidDriverInfo when driver_info lacks what the console needs */
  validate(node: DriverNode): void;
  /** @throws DriverError when the connection cannot start at all (a bad binary) */
  open(node: DriverNode, sink: ConsoleSink): Promise<ConsoleConnection>;
}

const FAKE_BANNER = "Anvil fake serial console: what you type comes back.\r\n";

/**
 * fake-hardware's console: a loop-back serial port. It greets each connection and echoes what is typed
 * (CR as CR LF, as a line discipline would), so viewers, the CLI and tests see both directions work.
 */
export class FakeConsole implements ConsoleInterface {
  readonly name = "fake";

  validate(): void {}

  open(node: DriverNode, sink: ConsoleSink): Promise<ConsoleConnection> {
    let open = true;
    queueMicrotask(() => {
      if (open) sink.data(Buffer.from(`${FAKE_BANNER}${node.name ?? node.uuid} login: `));
    });
    return Promise.resolve({
      write: (chunk) => {
        if (!open) return;
        const echoed = Buffer.from(chunk.toString("latin1").replace(/\r(?!\n)/g, "\r\n"), "latin1");
        queueMicrotask(() => {
          if (open) sink.data(echoed);
        });
      },
      close: () => {
        open = false;
        return Promise.resolve();
      },
    });
  }
}
