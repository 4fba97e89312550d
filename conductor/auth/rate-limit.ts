/**
 * Failed logins counted per key (a source address, a user name) in a fixed window: past `maxFailures` the
 * key is refused until its window ends, without even looking at the password (no bcrypt work either).
 */
export class FailureLimiter {
  private readonly windows = new Map<string, { failures: number; endsAt: number }>();

  constructor(
    private readonly options: { maxFailures: number; windowMs: number; now?: () => number; maxKeys?: number },
  ) {}

  /** Seconds until `key` may try again, or 0 if it may now. */
  retryAfterS(key: string): number {
    const window = this.windows.get(key);
    const now = this.now();
    if (!window || window.endsAt <= now) return 0;
    return window.failures >= this.options.maxFailures ? Math.ceil((window.endsAt - now) / 1000) : 0;
  }

  fail(key: string): void {
    const now = this.now();
    const window = this.windows.get(key);
    if (window && window.endsAt > now) {
      window.failures++;
      return;
    }
    if (this.windows.size >= (this.options.maxKeys ?? 10_000)) this.sweep(now);
    this.windows.set(key, { failures: 1, endsAt: now + this.options.windowMs });
  }

  succeed(key: string): void {
    this.windows.delete(key);
  }

  private sweep(now: number): void {
    for (const [key, window] of this.windows) if (window.endsAt <= now) this.windows.delete(key);
    // still full of live windows: drop the oldest rather than grow without bound
    while (this.windows.size >= (this.options.maxKeys ?? 10_000)) {
      const oldest = this.windows.keys().next().value;
      if (oldest === undefined) break;
      this.windows.delete(oldest);
    }
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }
}
