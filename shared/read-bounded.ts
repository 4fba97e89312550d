/** A body passed the bound its reader set; what followed was not read. */
export class BodyTooLarge extends Error {
  constructor(readonly max: number) {
    super(`the answer is larger than ${max} bytes`);
    this.name = "BodyTooLarge";
  }
}

/**
 * An HTTP body's bytes (a Node stream or a web ReadableStream), read up to `max`. Past it the iteration
 * stops, which destroys or cancels the stream, and BodyTooLarge is thrown: an answer from outside (a peer,
 * Keystone, Glance, a BMC) never fills memory. Errors of the stream itself pass through.
 * @throws BodyTooLarge
 */
export async function readBounded(body: AsyncIterable<Uint8Array>, max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > max) throw new BodyTooLarge(max);
    chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
  }
  return Buffer.concat(chunks, size);
}
