import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EscapeScanner } from "../../conductor/cli/commands/console.ts";

const feedAll = (chunks: string[]) => {
  const scanner = new EscapeScanner();
  let sent = "";
  for (const chunk of chunks) {
    const { forward, quit } = scanner.feed(Buffer.from(chunk, "latin1"));
    sent += forward.toString("latin1");
    if (quit) return { sent, quit: true };
  }
  return { sent, quit: false };
};

describe("the console's ~. escape", () => {
  it("quits on ~. at the start of input or of a line, however the bytes are split", () => {
    expect(feedAll(["~."])).toEqual({ sent: "", quit: true });
    expect(feedAll(["ls\r", "~", ".", "after"])).toEqual({ sent: "ls\r", quit: true });
    expect(feedAll(["ls\n~.x"])).toEqual({ sent: "ls\n", quit: true });
  });

  it("passes ~ elsewhere, ~~ as one ~, and ~ followed by anything else as both", () => {
    expect(feedAll(["a~.b"])).toEqual({ sent: "a~.b", quit: false });
    expect(feedAll(["~~."])).toEqual({ sent: "~.", quit: false });
    expect(feedAll(["~x"])).toEqual({ sent: "~x", quit: false });
  });

  it("forwards any input without a tilde unchanged, in any split", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: "binary-ascii" }).map((s) => s.replaceAll("~", ""))),
        (chunks) => {
          expect(feedAll(chunks)).toEqual({ sent: chunks.join(""), quit: false });
        },
      ),
    );
  });
});
