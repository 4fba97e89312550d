import type { Duplex } from "node:stream";

/**
 * Counts the raw bytes a peer sends until `stop()`. `ws` buffers a whole message (up to its maxPayload)
 * before it is seen, so the bound on an unauthenticated connection is enforced here, on the socket:
 * `onExceeded` runs once, as soon as the count passes `limit`, with at most one read chunk beyond it buffered.
 */
export function watchBytes(
  socket: Duplex,
  options: { limit: number; onExceeded: (bytes: number) => void },
): { stop(): void; readonly bytes: number } {
  let bytes = 0;
  let stopped = false;
  const onData = (chunk: Buffer): void => {
    bytes += chunk.length;
    if (bytes > options.limit) {
      stop();
      options.onExceeded(bytes);
    }
  };
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    socket.off("data", onData);
  };
  socket.on("data", onData);
  return {
    stop,
    get bytes() {
      return bytes;
    },
  };
}
