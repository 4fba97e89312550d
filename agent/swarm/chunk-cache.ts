/**
 * The chunks an agent holds for its wave, least recently used evicted beyond `maxBytes`. Buffers are shared
 * with the image pipeline, which only reads them.
 */
export class ChunkCache {
  private readonly chunks = new Map<number, Buffer>();
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
  get(index: number): Buffer | undefined {
    const chunk = this.chunks.get(index);
    if (chunk === undefined) return undefined;
    this.chunks.delete(index);
    this.chunks.set(index, chunk);
    return chunk;
  }

  /** Keeps the chunk (a chunk larger than the whole cache is not kept); evicts the oldest beyond the bound. */
  put(index: number, chunk: Buffer): boolean {
    if (chunk.length > this.maxBytes) return false;
    const old = this.chunks.get(index);
    if (old !== undefined) {
      this.bytes -= old.length;
      this.chunks.delete(index);
    }
    this.chunks.set(index, chunk);
    this.bytes += chunk.length;
    for (const [oldest, buffer] of this.chunks) {
      if (this.bytes <= this.maxBytes) break;
      this.chunks.delete(oldest);
      this.bytes -= buffer.length;
      this.onEvict(oldest);
    }
    return this.chunks.has(index);
  }

  clear(): void {
    this.chunks.clear();
    this.bytes = 0;
  }
}
