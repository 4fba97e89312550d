import { createHash } from "node:crypto";
import { Agent, request } from "node:http";
import { chunkPath } from "../../shared/swarm.ts";

/** Why a peer gave no chunk: busy (503) and missing (404) are worth asking others; the rest drop the peer. */
export type PeerFailure = "busy" | "missing" | "refused" | "unreachable" | "stalled" | "bad_length";

export class PeerFetchError extends Error {
  override name = "PeerFetchError";
  constructor(
    readonly failure: PeerFailure,
    message: string,
  ) {
    super(message);
  }
}

export interface PeerFetchOptions {
  /** The peer's base URL (http://ADDRESS:PORT/). */
  url: string;
  wave: string;
  token: string;
  index: number;
  /** The chunk's exact length: a body of any other length is refused. */
  length: number;
  /** No byte (or no answer) for this long: the peer stalls. */
  stallMs: number;
  agent: Agent;
  signal?: AbortSignal;
}

/** A keep-alive pool for peer requests (a few sockets per peer). */
export function peerAgent(): Agent {
  return new Agent({ keepAlive: true, maxSockets: 4, maxFreeSockets: 2 });
}

/** A chunk from a peer: the socket's buffers as they came (exactly the asked length), and their SHA-256. */
export interface PeerChunk {
  parts: Buffer[];
  sha256: string;
}

/**
 * Fetches one chunk of exactly `length` bytes from a peer, hashing it as it arrives (while the bytes are
 * still in cache, and overlapping the transfer). The caller compares the hash with the chunk's anchor.
 * @throws PeerFetchError; the signal's reason when aborted.
 */
export function fetchFromPeer(options: PeerFetchOptions): Promise<PeerChunk> {
  const { length, stallMs } = options;
  const url = new URL(chunkPath(options.wave, options.index), options.url);
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (error: Error | undefined, value?: PeerChunk): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      if (error) {
        req.destroy();
        reject(error);
      } else resolve(value as PeerChunk);
    };
    let timer = setTimeout(() => stalled(), stallMs);
    const stalled = (): void =>
      finish(new PeerFetchError("stalled", `peer ${url.host} sent nothing for ${stallMs} ms`));
    const touch = (): void => {
      clearTimeout(timer);
      timer = setTimeout(() => stalled(), stallMs);
    };
    const onAbort = (): void => finish(options.signal?.reason as Error);
    options.signal?.addEventListener("abort", onAbort, { once: true });
    const req = request(url, {
      agent: options.agent,
      headers: { authorization: `Bearer ${options.token}`, "accept-encoding": "identity" },
    });
    req.on("error", (error) =>
      finish(new PeerFetchError("unreachable", `peer ${url.host}: ${error.message}`)),
    );
    req.on("response", (res) => {
      touch();
      const status = res.statusCode ?? 0;
      if (status !== 200) {
        res.resume();
        const failure: PeerFailure = status === 503 ? "busy" : status === 404 ? "missing" : "refused";
        return finish(new PeerFetchError(failure, `peer ${url.host} answered ${status}`));
      }
      const declared = Number(res.headers["content-length"]);
      if (declared !== length) {
        res.resume();
        return finish(
          new PeerFetchError("bad_length", `peer ${url.host} offered ${declared} bytes, not ${length}`),
        );
      }
      // NOTE: an HTTP response's data buffers are its own (not views of a reused read buffer): kept as is.
      const parts: Buffer[] = [];
      const hash = createHash("sha256");
      let at = 0;
      res.on("data", (data: Buffer) => {
        touch();
        if (at + data.length > length) {
          return finish(new PeerFetchError("bad_length", `peer ${url.host} sent more than ${length} bytes`));
        }
        parts.push(data);
        hash.update(data);
        at += data.length;
      });
      res.on("end", () => {
        if (at !== length)
          finish(new PeerFetchError("unreachable", `peer ${url.host} stopped at ${at} of ${length} bytes`));
        else finish(undefined, { parts, sha256: hash.digest("hex") });
      });
      res.on("error", (error) =>
        finish(new PeerFetchError("unreachable", `peer ${url.host}: ${error.message}`)),
      );
      res.on("aborted", () =>
        finish(new PeerFetchError("unreachable", `peer ${url.host} dropped the connection at ${at} bytes`)),
      );
    });
    req.end();
  });
}
