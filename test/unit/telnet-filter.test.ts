import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { escapeTelnet, IAC, TelnetFilter } from "../../conductor/drivers/console/telnet.ts";

const [WILL, WONT, DO, DONT, SB, SE] = [0xfb, 0xfc, 0xfd, 0xfe, 0xfa, 0xf0];

/** One piece of a Telnet stream, with the data and the reply it must give. */
interface Token {
  bytes: number[];
  data: number[];
  reply: number[];
}

const dataByte = fc.integer({ min: 0, max: 0xfe });
const token: fc.Arbitrary<Token> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .array(dataByte, { minLength: 1, maxLength: 20 })
      .map((bytes) => ({ bytes, data: bytes, reply: [] })),
  },
  { weight: 2, arbitrary: fc.constant<Token>({ bytes: [IAC, IAC], data: [IAC], reply: [] }) },
  fc
    .record({ verb: fc.constantFrom(WILL, WONT, DO, DONT), option: fc.integer({ min: 0, max: 255 }) })
    .map(({ verb, option }) => ({
      bytes: [IAC, verb, option],
      data: [],
      reply: verb === WILL ? [IAC, DONT, option] : verb === DO ? [IAC, WONT, option] : [],
    })),
  // NOP, DM, BRK, IP, AO, AYT, EC, EL, GA, and a stray SE: commands without data
  fc.integer({ min: 0xf0, max: 0xf9 }).map((command) => ({ bytes: [IAC, command], data: [], reply: [] })),
  // a subnegotiation: its payload (with IAC IAC inside) never reaches the viewer
  fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 12 }).map((payload) => ({
    bytes: [IAC, SB, ...payload.flatMap((b) => (b === IAC ? [IAC, IAC] : [b])), IAC, SE],
    data: [],
    reply: [],
  })),
);

/** Splits bytes at generated points: a sequence may be cut anywhere between two reads. */
function chunked(bytes: number[], cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let from = 0;
  for (const point of [...points, bytes.length]) {
    chunks.push(Buffer.from(bytes.slice(from, point)));
    from = point;
  }
  return chunks;
}

function run(chunks: Buffer[]): { data: Buffer; reply: Buffer } {
  const filter = new TelnetFilter();
  const out = chunks.map((chunk) => filter.push(chunk));
  return { data: Buffer.concat(out.map((o) => o.data)), reply: Buffer.concat(out.map((o) => o.reply)) };
}

describe("the Telnet filter", () => {
  it("passes every data byte in order, IAC IAC as 0xFF, refuses offers, drops commands, across any cut", () => {
    fc.assert(
      fc.property(
        fc.array(token, { maxLength: 40 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (tokens, cuts) => {
          const bytes = tokens.flatMap((t) => t.bytes);
          const { data, reply } = run(chunked(bytes, cuts));
          expect([...data]).toEqual(tokens.flatMap((t) => t.data));
          expect([...reply]).toEqual(tokens.flatMap((t) => t.reply));
        },
      ),
      { numRuns: 500 },
    );
  });

  it("never throws on arbitrary bytes and never outputs more than it read", () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 6 }), (parts) => {
        const chunks = parts.map((p) => Buffer.from(p));
        const { data } = run(chunks);
        const input = Buffer.concat(chunks);
        expect(data.length).toBeLessThanOrEqual(input.length);
        if (!input.includes(IAC)) expect(data.equals(input)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it("reads back exactly what escapeTelnet wrote, whatever the bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.array(fc.nat(), { maxLength: 5 }), (raw, cuts) => {
        const escaped = escapeTelnet(Buffer.from(raw));
        const { data, reply } = run(chunked([...escaped], cuts));
        expect(data.equals(Buffer.from(raw))).toBe(true);
        expect(reply.length).toBe(0);
      }),
    );
  });

  it("answers a BMC's usual greeting (WILL ECHO, WILL SGA, DO TTYPE) with refusals and keeps the text", () => {
    const greeting = Buffer.from([IAC, WILL, 1, IAC, WILL, 3, IAC, DO, 24, ...Buffer.from("login: ")]);
    expect(run([greeting])).toEqual({
      data: Buffer.from("login: "),
      reply: Buffer.from([IAC, DONT, 1, IAC, DONT, 3, IAC, WONT, 24]),
    });
  });
});
