/**
 * Buffers for large pages (the detail page at latest, ~2.5 MB per 1,000 nodes, and on PostgreSQL the 1.6 MB of
 * shown texts it is written from), handed out again once their holder is done with them: a response once it has
 * been written to its socket, a read once its rows are used. A fresh buffer of that size is new memory every
 * time: the kernel faults in and zeroes its ~600 pages on first touch, which cost 1.2–2.2 ms of the page's
 * ~4 ms of conductor CPU on the shared two cores (0.15 ms to write the same texts into a buffer used before),
 * and its external memory drives V8's collections.
 *
 * A response's buffer comes back only from its `finish`: a writable stream has handed every chunk on (the
 * socket's write callbacks ran) before it emits it, so no byte of the buffer is still to be sent. A response
 * that ends otherwise (the client went away, an error) never gives its buffer back; it is collected.
 */
/** Below this a page takes a buffer of its own (what Node hands out for small sizes is cheap). */
const POOLED_BYTES = 256 * 1024;

export class PageBuffers {
  private readonly idle: Buffer[] = [];
  private timer: NodeJS.Timeout | undefined;

  /**
   * @param keep how many buffers wait for the next page at most (one per page in flight is enough)
   * @param idleMs after how long without a page the waiting buffers are let go (the memory is the OS's again):
   * a client paging through the fleet asks for the next page at once; a second of quiet ends its walk
   */
  constructor(
    private readonly keep = 8,
    private readonly idleMs = 1_000,
  ) {}

  /** A buffer of at least `size` bytes (contents undefined), the caller's until it gives it back. */
  take(size: number): Buffer {
    if (size < POOLED_BYTES) return Buffer.allocUnsafe(size);
    for (let i = this.idle.length - 1; i >= 0; i--) {
      const buffer = this.idle[i]!;
      if (buffer.length < size) continue;
      this.idle.splice(i, 1);
      return buffer;
    }
    // none fits: the oldest waiting one goes (pages grew), so buffers too small for the pages do not stay
    this.idle.shift();
    // room to grow: the next page of the same rows is a few bytes longer or shorter
    return Buffer.allocUnsafeSlow(size + (size >> 4));
  }

  /** Gives a buffer from take() back: the caller holds no view of it any more, nor does anything it sent. */
  give(buffer: Buffer): void {
    if (buffer.length < POOLED_BYTES || this.idle.length >= this.keep) return;
    this.idle.push(buffer);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => (this.idle.length = 0), this.idleMs).unref();
  }

  /** How many buffers wait now (tests). */
  get waiting(): number {
    return this.idle.length;
  }
}
