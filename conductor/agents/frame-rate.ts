/**
 * A token bucket per connection: `perSecond` frames on average, bursts up to `burst`. Cheap enough to run
 * on every frame (two numbers and a clock read).
 */
export class FrameRate {
  private tokens: number;
  private last: number;

  constructor(
    private readonly options: { perSecond: number; burst: number },
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = options.burst;
    this.last = now();
  }

  /** Spends one token; false when the connection is over its rate. */
  take(): boolean {
    const now = this.now();
    this.tokens = Math.min(
      this.options.burst,
      this.tokens + ((now - this.last) / 1000) * this.options.perSecond,
    );
    this.last = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}
