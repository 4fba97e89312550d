import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { LogRing } from "../../agent/link/log-ring.ts";
import { createLogger } from "../../shared/log.ts";

describe("the agent's log ring", () => {
  it("keeps the newest lines within its bytes, oldest dropped first", () => {
    const ring = new LogRing(30);
    for (let i = 0; i < 10; i++) ring.write(`line ${i}\n`);
    const text = ring.text();
    expect(text.length).toBeLessThanOrEqual(30);
    expect(text.endsWith("line 9\n")).toBe(true);
    expect(text).not.toContain("line 0");
  });

  it("gets every line the logger writes, as JSON with secrets masked, whatever the console's format", () => {
    const ring = new LogRing();
    const console: string[] = [];
    const destination = new PassThrough();
    destination.on("data", (chunk: Buffer) => console.push(chunk.toString()));
    const logger = createLogger({ level: "debug", format: "pretty", destination, tee: ring });
    logger.debug({ password: "hunter2" }, "dialing");
    logger.warn({ err: "sha256 mismatch" }, "command failed");
    const lines = ring
      .text()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => l.msg)).toEqual(["dialing", "command failed"]);
    expect(ring.text()).not.toContain("hunter2");
    expect(console.join("")).toContain("command failed");
  });
});
