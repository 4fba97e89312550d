export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  /** Source of randomness in [0, 1); injectable so tests can pin it. */
  random?: () => number;
}

/**
 * Exponential backoff with "equal jitter": half the delay is fixed, half random, so a thousand agents that
 * lost the same conductor do not all redial in the same millisecond, yet none waits near zero.
 */
export function backoffDelay(attempt: number, options: BackoffOptions): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), 30);
  const ceiling = Math.min(options.maxMs, options.initialMs * 2 ** exponent);
  const random = options.random ?? Math.random;
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/** A heartbeat period with ±10% jitter, for the same reason. */
export function jittered(intervalMs: number, random: () => number = Math.random): number {
  return Math.round(intervalMs * (0.9 + random() * 0.2));
}

/** Resolves after `ms`, or early (without throwing) when the signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
