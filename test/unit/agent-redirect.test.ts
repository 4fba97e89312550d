import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ConductorEndpoints, MAX_LEARNED_ENDPOINTS, parseConductorUrls } from "../../agent/link/endpoints.ts";
import { authenticateHello } from "../../conductor/agents/handshake.ts";
import { KeyedMutex } from "../../conductor/agents/keyed-mutex.ts";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { issueToken } from "../../conductor/agents/token.ts";
import type { Hello } from "../../shared/protocol.ts";
import { encodeFrame, parseFrame } from "../../shared/protocol.ts";

const NODE = "55555555-5555-4555-8555-555555555555";
const MAC = "52:54:00:55:55:55";
const OWNER = { url: "ws://10.0.0.2:6385/v1/agent", conductor: "c-b" };
const hello = (extra: Partial<Hello> = {}): Hello => ({
  type: "hello",
  v: 1,
  agent_version: "t",
  macs: [MAC],
  bmc_address: null,
  boot_id: "boot-1",
  ...extra,
});

function directory(): MemoryAgentDirectory {
  const dir = new MemoryAgentDirectory();
  dir.addNode({ uuid: NODE, macs: [MAC] });
  return dir;
}

describe("the redirect frame", () => {
  it("round-trips, and only ws:// or wss:// URLs without credentials are accepted", () => {
    const frame = { type: "redirect", url: OWNER.url, conductor: "c-b" } as const;
    expect(parseFrame(encodeFrame(frame), 4096)).toEqual({ ok: true, frame: { ...frame, v: 1 } });
    for (const url of ["http://x/v1/agent", "file:///etc/passwd", "ws://u:p@x/v1/agent", "nope", ""]) {
      const parsed = parseFrame(JSON.stringify({ type: "redirect", v: 1, url }), 4096);
      expect(parsed.ok ? "accepted" : parsed.error.code, url).toBe("BAD_FRAME");
    }
  });

  it("hostile redirect frames are values, never throws (fast-check)", () => {
    let tried = 0;
    fc.assert(
      fc.property(fc.oneof(fc.webUrl(), fc.string({ maxLength: 600 }), fc.jsonValue()), (url) => {
        tried += 1;
        const parsed = parseFrame(JSON.stringify({ type: "redirect", v: 1, url }), 4096);
        if (parsed.ok && parsed.frame.type === "redirect") expect(parsed.frame.url).toMatch(/^wss?:\/\//);
      }),
      { numRuns: 500 },
    );
    console.log(`redirect frames tried: ${tried}`);
  });
});

describe("a hello at a conductor that does not own the node", () => {
  const ownerElsewhere = () => OWNER;

  it("a first hello is redirected without a token being issued (the owner issues it)", async () => {
    const dir = directory();
    const outcome = await authenticateHello(dir, hello(), { tokenLocks: new KeyedMutex(), ownerElsewhere });
    expect(outcome).toEqual({ ok: "redirect", uuid: NODE, owner: OWNER });
    expect(dir.saveCount).toBe(0);
  });

  it("a wrong token is refused, not redirected (a redirect is no oracle for a guessed token)", async () => {
    const dir = directory();
    await dir.saveToken(NODE, { digest: issueToken().digest, bootId: "boot-1" });
    const outcome = await authenticateHello(dir, hello({ token: "guess" }), {
      tokenLocks: new KeyedMutex(),
      ownerElsewhere,
    });
    expect(outcome).toMatchObject({ ok: false, code: "BAD_TOKEN" });
  });

  it("the right token is redirected and kept; after one hop the agent is served where it lands", async () => {
    const dir = directory();
    const { token, digest } = issueToken();
    await dir.saveToken(NODE, { digest, bootId: "boot-1" });
    const context = { tokenLocks: new KeyedMutex(), ownerElsewhere };
    expect(await authenticateHello(dir, hello({ token }), context)).toEqual({
      ok: "redirect",
      uuid: NODE,
      owner: OWNER,
    });
    expect(await authenticateHello(dir, hello({ token, redirected: true }), context)).toEqual({
      ok: true,
      uuid: NODE,
      fastTrack: false,
    });
    expect((await dir.tokenRecord(NODE))?.digest).toBe(digest);
  });
});

describe("the agent's list of conductors", () => {
  it("parses a comma-separated list, dropping blanks and duplicates", () => {
    const urls = parseConductorUrls(" ws://a/v1/agent,,ws://b/v1/agent , ws://a/v1/agent");
    expect(new ConductorEndpoints(urls).all()).toEqual(["ws://a/v1/agent", "ws://b/v1/agent"]);
    expect(() => new ConductorEndpoints(parseConductorUrls(" , "))).toThrow(/at least one/);
  });

  it("a failure moves to the next URL, wrapping; a redirect dials its target next, learning it if new", () => {
    const list = new ConductorEndpoints(["ws://a", "ws://b", "ws://c"]);
    list.advance();
    expect(list.current()).toBe("ws://b");
    list.redirectTo("ws://a");
    expect(list.current()).toBe("ws://a");
    list.redirectTo("ws://d");
    expect(list.current()).toBe("ws://d");
    expect(list.all()).toEqual(["ws://a", "ws://d", "ws://b", "ws://c"]);
    list.advance();
    list.advance();
    list.advance();
    expect(list.current()).toBe("ws://a");
  });

  it("keeps at most MAX_LEARNED_ENDPOINTS redirect targets, never dropping the command line's", () => {
    const list = new ConductorEndpoints(["ws://a", "ws://b"]);
    for (let i = 0; i < 1000; i++) list.redirectTo(`ws://r${i}`);
    expect(list.all()).toHaveLength(2 + MAX_LEARNED_ENDPOINTS);
    expect(list.all()).toEqual(expect.arrayContaining(["ws://a", "ws://b", "ws://r999"]));
    expect(list.all()).not.toContain("ws://r0");
    expect(list.current()).toBe("ws://r999");
    // the cycle still reaches every kept URL
    const seen = new Set<string>();
    for (let i = 0; i < list.all().length; i++, list.advance()) seen.add(list.current());
    expect(seen.size).toBe(2 + MAX_LEARNED_ENDPOINTS);
  });
});
