import { describe, expect, it } from "vitest";
import { PageBuffers } from "../../conductor/page-buffers.ts";

const PAGE = 2_500_000;

describe("the detail pages' buffers (PageBuffers)", () => {
  it("hands out a buffer at least the page's size", () => {
    const buffers = new PageBuffers();
    expect(buffers.take(PAGE).length).toBeGreaterThanOrEqual(PAGE);
    expect(buffers.take(100).length).toBeGreaterThanOrEqual(100);
  });

  it("hands a buffer out again only once it was given back", () => {
    const buffers = new PageBuffers();
    const first = buffers.take(PAGE);
    // a page still being sent: the next page gets another buffer
    const second = buffers.take(PAGE);
    expect(second.buffer).not.toBe(first.buffer);
    buffers.give(first);
    expect(buffers.take(PAGE - 10).buffer).toBe(first.buffer);
    expect(buffers.take(PAGE).buffer).not.toBe(first.buffer);
  });

  it("never hands out one buffer twice while it is taken", () => {
    const buffers = new PageBuffers(2);
    const taken = Array.from({ length: 5 }, () => buffers.take(PAGE));
    for (const buffer of taken) buffers.give(buffer);
    expect(buffers.waiting).toBe(2);
    const again = [buffers.take(PAGE), buffers.take(PAGE), buffers.take(PAGE)];
    expect(new Set(again.map((buffer) => buffer.buffer)).size).toBe(3);
  });

  it("keeps no small buffers, and lets one too small for the pages go", () => {
    const buffers = new PageBuffers();
    buffers.give(buffers.take(1_000));
    expect(buffers.waiting).toBe(0);
    const small = buffers.take(300_000);
    buffers.give(small);
    expect(buffers.waiting).toBe(1);
    expect(buffers.take(PAGE).buffer).not.toBe(small.buffer);
    expect(buffers.waiting).toBe(0);
  });

  it("lets the waiting buffers go after a while without pages", async () => {
    const buffers = new PageBuffers(8, 5);
    buffers.give(buffers.take(PAGE));
    expect(buffers.waiting).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(buffers.waiting).toBe(0);
  });
});
