import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ipmipowerConfig, parseIpmipowerOutput } from "../../scripts/bench/ipmipower.ts";

describe("ipmipower output and config", () => {
  it("reads on, off and errors per host", () => {
    const out = "127.100.0.2: on\n127.100.0.1: off\n10.0.0.9: connection timeout\n\ngarbage line\n";
    expect(parseIpmipowerOutput(out)).toEqual([
      { host: "127.100.0.2", state: "on" },
      { host: "127.100.0.1", state: "off" },
      { host: "10.0.0.9", state: "error", detail: "connection timeout" },
    ]);
  });

  it("never throws, and every answer names a host without spaces (fast-check)", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (text) => {
        for (const answer of parseIpmipowerOutput(text)) {
          expect(answer.host).not.toMatch(/\s/);
          expect(["on", "off", "error"]).toContain(answer.state);
        }
      }),
    );
  });

  it("puts the credentials in the file, and refuses ones the file cannot hold", () => {
    const text = ipmipowerConfig({ username: "admin", password: "pw" });
    expect(text).toMatch(/^username admin$/m);
    expect(text).toMatch(/^password pw$/m);
    expect(text).toMatch(/^driver-type LAN_2_0$/m);
    expect(() => ipmipowerConfig({ username: "admin", password: "two words" })).toThrow();
    expect(() => ipmipowerConfig({ username: "admin", password: "a#b" })).toThrow();
  });
});
