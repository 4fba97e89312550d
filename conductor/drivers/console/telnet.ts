/** Telnet's command bytes (RFC 854) that the filter reads. */
export const IAC = 0xff;
const DONT = 0xfe;
const DO = 0xfd;
const WONT = 0xfc;
const WILL = 0xfb;
const SB = 0xfa;
const SE = 0xf0;

type State = "data" | "iac" | "option" | "sub" | "sub-iac";

/** What one chunk from the server gave: bytes for the viewer, and bytes to send back to the server. */
export interface TelnetChunk {
  data: Buffer;
  /** Refusals of the options the server offered or asked for (may be empty). */
  reply: Buffer;
}

/**
 * The client side of a Telnet stream as a serial-console relay needs it (RFC 854/855): data bytes pass
 * through in order, IAC IAC is a literal 0xFF, every option the server offers (WILL) or asks for (DO) is
 * refused (DONT, WONT: the console stays a plain byte pipe, as the serial line it stands for), and
 * subnegotiations and other commands (NOP, GA, AYT...) are dropped. A sequence cut between two chunks is
 * resumed in the next. Never throws: the bytes come from a BMC, outside input.
 */
export class TelnetFilter {
  private state: State = "data";
  private verb = 0;

  push(chunk: Buffer): TelnetChunk {
    const data = Buffer.allocUnsafe(chunk.length);
    let size = 0;
    const reply: number[] = [];
    for (const byte of chunk) {
      switch (this.state) {
        case "data":
          if (byte === IAC) this.state = "iac";
          else data[size++] = byte;
          break;
        case "iac":
          if (byte === IAC) {
            data[size++] = IAC;
            this.state = "data";
          } else if (byte >= WILL && byte <= DONT) {
            this.verb = byte;
            this.state = "option";
          } else if (byte === SB) this.state = "sub";
          else this.state = "data"; // NOP, GA, AYT, a stray SE...: no data
          break;
        case "option":
          // NOTE: only offers and requests are answered; a WONT or DONT confirms the state a refusing
          // client is already in, and answering it would start the loop RFC 854 warns about
          if (this.verb === WILL) reply.push(IAC, DONT, byte);
          else if (this.verb === DO) reply.push(IAC, WONT, byte);
          this.state = "data";
          break;
        case "sub":
          if (byte === IAC) this.state = "sub-iac";
          break;
        case "sub-iac":
          // IAC SE ends it; IAC IAC is a literal inside it; anything else is a malformed one: keep skipping
          this.state = byte === SE ? "data" : "sub";
          break;
      }
    }
    return { data: data.subarray(0, size), reply: Buffer.from(reply) };
  }
}

/** Keystrokes as Telnet data: each 0xFF doubled (IAC IAC), everything else as it is. Pure. */
export function escapeTelnet(chunk: Buffer): Buffer {
  if (!chunk.includes(IAC)) return chunk;
  const out: number[] = [];
  for (const byte of chunk) {
    out.push(byte);
    if (byte === IAC) out.push(IAC);
  }
  return Buffer.from(out);
}
