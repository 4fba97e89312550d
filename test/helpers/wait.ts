/**
 * Polling for tests: the condition, not wall time, is what a test asserts; the timeout only ends a test that
 * would otherwise hang.
 */
export interface WaitOptions {
  /** What is awaited, for the timeout's message. */
  what?: string;
  timeoutMs?: number;
  intervalMs?: number;
}

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

/** Polls `probe` until it answers something other than undefined, and returns that. @throws Error on timeout */
export async function until<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  options: WaitOptions = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${options.what ?? "a condition"}`);
    await sleep(options.intervalMs ?? 50);
  }
}

/** Polls `check` until it holds. @throws Error on timeout */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  options: WaitOptions = {},
): Promise<void> {
  await until(async () => ((await check()) ? true : undefined), options);
}
