import type pg from "pg";

/**
 * `COPY … TO STDOUT` as one query of a pg client (pg's Submittable, as pg-cursor is): resolves with the
 * CopyData payloads joined, read by pg's own protocol parser; rejects with PostgreSQL's error (pg queues the
 * client's next query until the server is ready again, as after its own queries).
 * NOTE: pg-copy-streams cost 0.2 ms more of the client's CPU per detail page (1.38 against 1.18 ms, 500 reads
 * of 1.56 MB): its stream takes over the socket and frames the messages again in JavaScript.
 */
const MIN_SIZE = 1 << 16;
/** A hint, not a cap: the last COPY's size, so that the next one of its kind grows no buffer. */
const MAX_HINT = 1 << 25;
let sizeHint = MIN_SIZE;

export function copyOut(client: pg.PoolClient, text: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // NOTE: each payload is a view into pg's read buffer, which its next read overwrites: copied as it comes
    let out = Buffer.allocUnsafe(sizeHint);
    let size = 0;
    const none = (): void => undefined;
    client.query({
      submit: (connection) => connection.query(text),
      handleCopyData: ({ chunk }: { chunk: Buffer }) => {
        if (size + chunk.length > out.length) {
          const grown = Buffer.allocUnsafe(Math.max(out.length * 2, size + chunk.length));
          out.copy(grown, 0, 0, size);
          out = grown;
        }
        size += chunk.copy(out, size);
      },
      // pg is done with a query that failed at its error (no ReadyForQuery is passed on), as with its own
      handleError: (error: unknown) => reject(error instanceof Error ? error : new Error(String(error))),
      handleReadyForQuery: () => {
        sizeHint = Math.min(Math.max(size, MIN_SIZE), MAX_HINT);
        resolve(out.subarray(0, size));
      },
      handleCommandComplete: none,
      handleRowDescription: none,
      handleDataRow: none,
      handleEmptyQuery: none,
      handlePortalSuspended: none,
    });
  });
}
