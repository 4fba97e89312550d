/**
 * A chunk as it arrived: the socket's own buffers, in order. Kept as received, not joined into one buffer:
 * joining copied every peer byte into fresh memory, 3.2 s of an agent process's 24.5 s profile in an 8-node
 * wave (more than hashing those bytes).
 */
export type Chunk = readonly Buffer[];

/** The chunk's length in bytes. */
export function chunkLength(chunk: Chunk): number {
  let length = 0;
  for (const part of chunk) length += part.length;
  return length;
}

/**
 * The chunks an agent holds for its wave, least recently used evicted beyond `maxBytes`. Buffers are shared
 * with the image pipeline, which only reads them.
 */
export class ChunkCache {
  private readonly chunks = new Map<number, { parts: Chunk; length: number }>();
  private bytes = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly onEvict: (index: number) => void = () => undefined,
  ) {}

  get size(): number {
    return this.bytes;
  }

  has(index: number): boolean {
    return this.chunks.has(index);
  }

  /** The chunk, now the most recently used; undefined when not held. */
  get(index: number): Chunk | undefined {
    const chunk = this.chunks.get(index);
    if (chunk === undefined) return undefined;
    this.chunks.delete(index);
    this.chunks.set(index, chunk);
    return chunk.parts;
  }

  /** Keeps the chunk (a chunk larger than the whole cache is not kept); evicts the oldest beyond the bound. */
  put(index: number, parts: Chunk): boolean {
    const length = chunkLength(parts);
    if (length > this.maxBytes) return false;
    const old = this.chunks.get(index);
    if (old !== undefined) {
      this.bytes -= old.length;
      this.chunks.delete(index);
    }
    this.chunks.set(index, { parts, length });
    this.bytes += length;
    for (const [oldest, held] of this.chunks) {
      if (this.bytes <= this.maxBytes) break;
      this.chunks.delete(oldest);
      this.bytes -= held.length;
      this.onEvict(oldest);
    }
    return this.chunks.has(index);
  }

  clear(): void {
    this.chunks.clear();
    this.bytes = 0;
  }
}
