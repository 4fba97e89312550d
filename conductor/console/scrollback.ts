/** The serial output a console keeps for a viewer who attaches later: the newest bytes, at most `limit`. */
export class Scrollback {
  private chunks: Buffer[] = [];
  private size = 0;

  /** @param limit bytes kept (64 KiB by default: a few screens of boot log) */
  constructor(readonly limit = 64 * 1024) {}

  get bytes(): number {
    return this.size;
  }

  append(chunk: Buffer): void {
    if (chunk.length === 0) return;
    if (chunk.length >= this.limit) {
      this.chunks = [Buffer.from(chunk.subarray(chunk.length - this.limit))];
      this.size = this.limit;
      return;
    }
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.limit) {
      const first = this.chunks[0]!;
      const excess = this.size - this.limit;
      if (first.length <= excess) {
        this.chunks.shift();
        this.size -= first.length;
      } else {
        this.chunks[0] = first.subarray(excess);
        this.size -= excess;
      }
    }
  }

  /** Everything kept, oldest first, as one buffer. */
  contents(): Buffer {
    return Buffer.concat(this.chunks, this.size);
  }
}
