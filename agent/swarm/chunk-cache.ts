/**
 * A chunk's bytes, in order: one buffer (a pooled chunk buffer) or several (as a test or a caller gives them).
 */
export type Chunk = readonly Buffer[];

/** The chunk's length in bytes. */
export function chunkLength(chunk: Chunk): number {
  let length = 0;
  for (const part of chunk) length += part.length;
  return length;
}

/**
 * Chunk-sized buffers handed back when nobody reads them any more. A wave's agent receives every chunk of
 * the image: kept in fresh buffers (node:http's 64 KiB per socket read, a copy per store part), the garbage
 * collector took 32 s of the agent processes' 143 s busy profile in a 16-node 1 GiB wave. With the pool, an
 * agent's chunk memory is its cache plus its read-ahead window, touched once and reused.
 */
export class ChunkPool {
  private readonly free: Buffer[] = [];

  constructor(readonly chunkBytes: number) {}

  /** A buffer of chunkBytes (its content is stale: the caller fills it). */
  take(): Buffer {
    return this.free.pop() ?? Buffer.allocUnsafeSlow(this.chunkBytes);
  }

  give(buffer: Buffer): void {
    if (buffer.length === this.chunkBytes) this.free.push(buffer);
  }

  clear(): void {
    this.free.length = 0;
  }
}

/**
 * A chunk and a count of who reads it (the cache, the image pipeline, each upload to a peer): `onFree` runs
 * when the last of them lets go, and only then may its buffer be reused.
 */
export class HeldChunk {
  private refs = 1;

  constructor(
    readonly parts: Chunk,
    private readonly onFree: () => void = () => undefined,
  ) {}

  retain(): void {
    this.refs += 1;
  }

  release(): void {
    this.refs -= 1;
    if (this.refs === 0) this.onFree();
  }
}

/**
 * The chunks an agent holds for its wave, least recently used evicted beyond `maxBytes`. Buffers are shared
 * with the image pipeline and the uploads, which only read them; the cache holds one reference per chunk.
 */
export class ChunkCache {
  private readonly chunks = new Map<number, { held: HeldChunk; length: number }>();
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
    return this.touch(index)?.parts;
  }

  /**
   * The chunk, now the most recently used, with one more reference: call `release` once done reading it
   * (its buffer may be reused after that). Undefined when not held.
   */
  lease(index: number): { parts: Chunk; release: () => void } | undefined {
    const held = this.touch(index);
    if (held === undefined) return undefined;
    held.retain();
    let released = false;
    return {
      parts: held.parts,
      release: () => {
        if (released) return;
        released = true;
        held.release();
      },
    };
  }

  /**
   * Keeps the chunk (a chunk larger than the whole cache is not kept); evicts the oldest beyond the bound.
   * A HeldChunk gains a reference while cached (the caller keeps its own).
   */
  put(index: number, chunk: Chunk | HeldChunk): boolean {
    const held = chunk instanceof HeldChunk ? chunk : new HeldChunk(chunk);
    const length = chunkLength(held.parts);
    if (length > this.maxBytes) return false;
    if (chunk instanceof HeldChunk) held.retain();
    const old = this.chunks.get(index);
    if (old !== undefined) {
      this.bytes -= old.length;
      this.chunks.delete(index);
      old.held.release();
    }
    this.chunks.set(index, { held, length });
    this.bytes += length;
    for (const [oldest, entry] of this.chunks) {
      if (this.bytes <= this.maxBytes) break;
      this.chunks.delete(oldest);
      this.bytes -= entry.length;
      entry.held.release();
      this.onEvict(oldest);
    }
    return this.chunks.has(index);
  }

  /** Stops holding the chunk (its buffer is reused once its other readers let go); false when not held. */
  delete(index: number): boolean {
    const entry = this.chunks.get(index);
    if (entry === undefined) return false;
    this.chunks.delete(index);
    this.bytes -= entry.length;
    entry.held.release();
    return true;
  }

  clear(): void {
    for (const entry of this.chunks.values()) entry.held.release();
    this.chunks.clear();
    this.bytes = 0;
  }

  private touch(index: number): HeldChunk | undefined {
    const entry = this.chunks.get(index);
    if (entry === undefined) return undefined;
    this.chunks.delete(index);
    this.chunks.set(index, entry);
    return entry.held;
  }
}
