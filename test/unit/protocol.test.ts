import { describe, expect, it } from "vitest";
import { ERROR_CATALOGUE, ERROR_CODES, isRetryable } from "../../shared/errors.ts";
import {
  COMMAND_ARGS,
  COMMAND_NAMES,
  encodeFrame,
  parseCommandArgs,
  parseFrame,
} from "../../shared/protocol.ts";

const MAX = 64 * 1024;
const hello = {
  type: "hello",
  v: 1,
  agent_version: "0.1.0",
  macs: ["52:54:00:AA:BB:CC"],
  bmc_address: null,
  boot_id: "b1",
};

describe("parseFrame", () => {
  it("accepts a hello and lower-cases its MACs", () => {
    const parsed = parseFrame(JSON.stringify(hello), MAX);
    expect(parsed.ok).toBe(true);
    if (parsed.ok && parsed.frame.type === "hello") expect(parsed.frame.macs).toEqual(["52:54:00:aa:bb:cc"]);
  });

  it("round-trips every frame type through encodeFrame", () => {
    const frames = [
      { type: "welcome", node_uuid: "n1", token: "t", heartbeat_interval_ms: 5000, fast_track: false },
      { type: "command", id: "c1", name: "get_inventory", args: {} },
      { type: "progress", id: "c1", step: "download", bytes_done: 10, bytes_total: null, rate_bps: 3 },
      { type: "result", id: "c1", ok: true, value: { a: 1 } },
      { type: "result", id: "c1", ok: false, error: { code: "BUSY", message: "m", retryable: true } },
      { type: "ack", id: "c1" },
      { type: "cancel", id: "c1" },
      { type: "heartbeat", ts: 1, busy: "c1" },
      { type: "error", code: "BAD_TOKEN", message: "no" },
    ] as const;
    for (const frame of frames) {
      const parsed = parseFrame(encodeFrame(frame), MAX);
      expect(parsed).toEqual({ ok: true, frame: { ...frame, v: 1 } });
    }
  });

  it.each([
    ["not JSON", "{nope", "BAD_FRAME"],
    ["an array", "[1,2]", "BAD_FRAME"],
    ["a string", '"hello"', "BAD_FRAME"],
    ["no type", JSON.stringify({ v: 1 }), "BAD_FRAME"],
    ["an unknown type", JSON.stringify({ type: "teleport", v: 1 }), "UNKNOWN_TYPE"],
    ["another version", JSON.stringify({ ...hello, v: 2 }), "UNSUPPORTED_VERSION"],
    ["a bad MAC", JSON.stringify({ ...hello, macs: ["zz"] }), "BAD_FRAME"],
    [
      "a result with both shapes missing",
      JSON.stringify({ type: "result", v: 1, id: "x", ok: false }),
      "BAD_FRAME",
    ],
    [
      "an unknown error code",
      JSON.stringify({ type: "error", v: 1, code: "NOPE", message: "" }),
      "BAD_FRAME",
    ],
  ])("rejects %s without throwing", (_label, text, code) => {
    const parsed = parseFrame(text, MAX);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.error.code).toBe(code);
  });

  it("measures the limit in UTF-8 bytes, before parsing", () => {
    const text = JSON.stringify({ ...hello, agent_version: "é".repeat(40) }); // 2 bytes per é
    const bytes = Buffer.byteLength(text);
    expect(parseFrame(text, bytes).ok).toBe(true);
    const parsed = parseFrame(text, bytes - 1);
    expect(parsed.ok ? "ok" : parsed.error.code).toBe("FRAME_TOO_LARGE");
    expect(parseFrame("x".repeat(MAX + 1), MAX)).toMatchObject({
      ok: false,
      error: { code: "FRAME_TOO_LARGE" },
    });
  });

  it("keeps the id of a malformed frame so a pending call can be failed", () => {
    const parsed = parseFrame(JSON.stringify({ type: "result", v: 1, id: "c9", ok: "yes" }), MAX);
    expect(parsed).toMatchObject({ ok: false, id: "c9" });
  });
});

describe("command arguments", () => {
  it("has a schema for every command name", () => {
    expect(Object.keys(COMMAND_ARGS).sort()).toEqual([...COMMAND_NAMES].sort());
  });

  it("accepts missing args for commands that take none", () => {
    expect(parseCommandArgs("get_inventory", undefined)).toEqual({ ok: true, args: {} });
  });

  it("rejects unknown fields", () => {
    const parsed = parseCommandArgs("sync", { force: true });
    expect(parsed.ok).toBe(false);
  });

  it("validates write_image with H1's image request and root device hints", () => {
    const ok = parseCommandArgs("write_image", {
      image: { url: "http://127.0.0.1:1/img.raw", image_type: "whole-disk" },
      root_device: { size: ">= 4" },
    });
    expect(ok.ok).toBe(true);
    expect(parseCommandArgs("write_image", { image: { url: "ftp://x", image_type: "whole-disk" } }).ok).toBe(
      false,
    );
    expect(
      parseCommandArgs("write_image", { image: { url: "http://x/y", image_type: "partition" } }).ok,
    ).toBe(false);
  });
});

describe("error catalogue", () => {
  it("classifies transient conditions as retryable and client mistakes as permanent", () => {
    expect(isRetryable("BUSY")).toBe(true);
    expect(isRetryable("NOT_CONNECTED")).toBe(true);
    expect(isRetryable("BAD_TOKEN")).toBe(false);
    expect(isRetryable("BAD_ARGS")).toBe(false);
    for (const code of ERROR_CODES) expect(ERROR_CATALOGUE[code].message.length).toBeGreaterThan(0);
  });
});
