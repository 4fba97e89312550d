/** A piece of the disk image at its offset on the target; `data` is read-only (it may be shared). */
export interface Extent {
  offset: number;
  data: Buffer;
}

/** Bytes [start, end) of an image or object. */
export interface ByteWindow {
  start: number;
  end: number;
}

/** A raw image (from byte `start` on): every byte at its own offset, in order. */
export async function* rawExtents(source: AsyncIterable<Buffer>, start = 0): AsyncGenerator<Extent> {
  let offset = start;
  for await (const data of source) {
    yield { offset, data };
    offset += data.length;
  }
}
