import fc from "fast-check";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { BodyTooLarge, readBounded } from "../../shared/read-bounded.ts";

describe("readBounded", () => {
  it("returns every byte up to the bound, refuses past it and stops reading (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 20 }),
        fc.nat({ max: 600 }),
        async (chunks, max) => {
          const total = chunks.reduce((n, c) => n + c.length, 0);
          let pulled = 0;
          let closed = false;
          async function* body(): AsyncGenerator<Uint8Array> {
            try {
              for (const chunk of chunks) {
                pulled++;
                yield chunk;
              }
            } finally {
              closed = true;
            }
          }
          if (total <= max) {
            expect(await readBounded(body(), max)).toEqual(Buffer.concat(chunks));
          } else {
            await expect(readBounded(body(), max)).rejects.toBeInstanceOf(BodyTooLarge);
            // nothing after the chunk that crossed the bound was asked for
            let seen = 0;
            const crossing = chunks.findIndex((c) => (seen += c.length) > max);
            expect(pulled).toBe(crossing + 1);
          }
          expect(closed).toBe(true);
        },
      ),
    );
  });

  it("destroys a Node stream it stops reading", async () => {
    const stream = Readable.from([Buffer.alloc(10), Buffer.alloc(10), Buffer.alloc(10)]);
    await expect(readBounded(stream, 15)).rejects.toBeInstanceOf(BodyTooLarge);
    expect(stream.destroyed).toBe(true);
  });

  it("reads a web stream and cancels one past its bound", async () => {
    const web = (parts: number[]) =>
      new Response(new Blob(parts.map((n) => new Uint8Array(n)))).body as ReadableStream<Uint8Array>;
    expect((await readBounded(web([3, 4]), 7)).length).toBe(7);
    await expect(readBounded(web([3, 4]), 6)).rejects.toBeInstanceOf(BodyTooLarge);
  });
});
