/**
 * Watches a counter that grows while work makes progress (the I/O a disk completed) and calls `onStall` once
 * when it has not moved for `stallMs`. A counter that cannot be read (null, or a throw) never stalls: the watch
 * only stops work it has seen stand still. Returns the function that ends the watch.
 */
export function watchForStall(
  read: () => Promise<number | null>,
  stallMs: number,
  onStall: () => void,
): () => void {
  // a few looks per stall window, at most one every 10 s on long windows
  const everyMs = Math.min(10_000, Math.max(100, Math.floor(stallMs / 4)));
  let last: number | null = null;
  let movedAt = Date.now();
  let busy = false;
  let stopped = false;
  const look = async (): Promise<void> => {
    const value = await read().catch(() => null);
    if (stopped) return;
    if (value === null || value !== last) {
      last = value;
      movedAt = Date.now();
      return;
    }
    if (Date.now() - movedAt >= stallMs) {
      stop();
      onStall();
    }
  };
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    void look().finally(() => (busy = false));
  }, everyMs);
  timer.unref();
  const stop = (): void => {
    stopped = true;
    clearInterval(timer);
  };
  return stop;
}
