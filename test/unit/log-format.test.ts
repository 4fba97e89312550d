import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger, prettyWanted } from "../../shared/log.ts";

function sink(isTTY: boolean): { stream: Writable & { isTTY?: boolean }; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  }) as Writable & { isTTY?: boolean };
  stream.isTTY = isTTY;
  return { stream, text: () => chunks.join("") };
}

describe("log format", () => {
  it("auto is pretty on a terminal and JSON when piped", () => {
    expect(prettyWanted("auto", sink(true).stream)).toBe(true);
    expect(prettyWanted("auto", sink(false).stream)).toBe(false);
    expect(prettyWanted("json", sink(true).stream)).toBe(false);
    expect(prettyWanted("pretty", sink(false).stream)).toBe(true);
  });

  it("pretty lines read as one line of words, with secrets still redacted", () => {
    const out = sink(false);
    createLogger({ destination: out.stream, format: "pretty" }).info(
      { node: "n1", password: "hunter2" },
      "conductor listening",
    );
    const text = out.text();
    expect(text.trim().split("\n")).toHaveLength(1);
    expect(text).toContain("INFO");
    expect(text).toContain("conductor listening");
    expect(text).not.toMatch(/^\{/);
    expect(text).not.toContain("hunter2");
  });

  it("JSON lines parse and redact", () => {
    const out = sink(false);
    createLogger({ destination: out.stream, format: "json" }).warn({ token: "abc" }, "x");
    const line = JSON.parse(out.text()) as Record<string, unknown>;
    expect(line.msg).toBe("x");
    expect(line.token).toBe("******");
  });
});
