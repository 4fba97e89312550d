import { randomBytes } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { PEER_HEADERS, PeerAuth, type Asserted } from "../../conductor/auth/peer-identity.ts";

const secret = randomBytes(32);
const asserted: Asserted = {
  identity: { user: "alice", role: "member", project: "p1", method: "token" },
  client: "192.0.2.7",
};
const call = { method: "PUT", url: "/v1/nodes/n1/states/power", from: "a/1", to: "b/2" };
const self = { method: call.method, url: call.url, self: call.to };

describe("conductors' MACs on forwarded calls", () => {
  it("a signed call verifies once, with the asserted identity and client", () => {
    const peer = new PeerAuth({ secret });
    const headers = peer.sign(call, asserted);
    expect(peer.verify(self, headers)).toEqual({ ok: true, asserted, from: "a/1" });
    expect(peer.verify(self, headers)).toEqual({ ok: false, reason: "replayed" });
  });

  it("refuses any change to what the MAC covers", () => {
    const peer = new PeerAuth({ secret });
    const tampered: [string, Record<string, string>, typeof self][] = [];
    for (const name of Object.values(PEER_HEADERS)) {
      const headers = peer.sign(call, asserted);
      tampered.push([name, { ...headers, [name]: `${headers[name]}x` }, self]);
    }
    tampered.push(["method", peer.sign(call, asserted), { ...self, method: "DELETE" }]);
    tampered.push(["url", peer.sign(call, asserted), { ...self, url: "/v1/nodes/n2/states/power" }]);
    for (const [what, headers, on] of tampered) expect(peer.verify(on, headers).ok, what).toBe(false);
  });

  it("refuses a call outside the window either way, and one meant for another conductor", () => {
    let now = 1_000_000;
    const peer = new PeerAuth({ secret, now: () => now, windowMs: 30_000 });
    const headers = peer.sign(call, asserted);
    now += 30_001;
    expect(peer.verify(self, headers)).toEqual({ ok: false, reason: "stale" });
    now -= 60_002;
    expect(peer.verify(self, headers)).toEqual({ ok: false, reason: "stale" });
    now += 30_001;
    expect(peer.verify({ ...self, self: "c/3" }, headers)).toEqual({
      ok: false,
      reason: "meant for another conductor",
    });
  });

  it("never throws on hostile headers, and never accepts them", () => {
    const peer = new PeerAuth({ secret });
    const value = fc.oneof(fc.string(), fc.constant(undefined), fc.array(fc.string(), { maxLength: 2 }));
    let tried = 0;
    fc.assert(
      fc.property(
        fc.record(Object.fromEntries(Object.values(PEER_HEADERS).map((n) => [n, value]))),
        (headers) => {
          tried++;
          expect(peer.verify(self, headers).ok).toBe(false);
        },
      ),
      { numRuns: 2000 },
    );
    expect(tried).toBe(2000);
  });

  it("a correctly signed but malformed identity is refused, not trusted", () => {
    const peer = new PeerAuth({ secret });
    const bad = { ...asserted, identity: { ...asserted.identity, role: "root" } } as unknown as Asserted;
    expect(peer.verify(self, peer.sign(call, bad))).toEqual({ ok: false, reason: "malformed identity" });
  });
});
