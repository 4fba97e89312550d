import { createHash } from "node:crypto";
import { chunkPath } from "../../shared/swarm.ts";
import { ImageError } from "../image/errors.ts";
import { ConnectionDroppedError, Http1Connection } from "../image/http1.ts";
import type { Http1Response } from "../image/http1.ts";
import { peerClientTls, peerKey } from "./peer-tls.ts";

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

/**
 * Keep-alive connections to peers, a few idle ones per peer. They read into small reused rings (the image
 * download's HTTP/1.1 client), so a peer's chunk allocates nothing on its way in (node:http allocated a fresh
 * buffer per socket read), and its body is read straight into its pooled chunk buffer.
 */
export class PeerConnections {
  private readonly idle = new Map<string, Http1Connection[]>();
  private closed = false;

  constructor(private readonly maxIdlePerPeer = 2) {}

  /** An idle connection to `origin` (reused: the peer may have closed it meanwhile), or undefined. */
  take(origin: string): Http1Connection | undefined {
    const list = this.idle.get(origin);
    for (let connection = list?.pop(); connection !== undefined; connection = list?.pop()) {
      if (connection.reusable) return connection;
      connection.close();
    }
    return undefined;
  }

  give(origin: string, connection: Http1Connection): void {
    const list = this.idle.get(origin) ?? [];
    if (this.closed || !connection.reusable || list.length >= this.maxIdlePerPeer) {
      connection.close();
      return;
    }
    list.push(connection);
    this.idle.set(origin, list);
  }

  close(): void {
    this.closed = true;
    for (const list of this.idle.values()) for (const connection of list) connection.close();
    this.idle.clear();
  }
}

export interface PeerFetchOptions {
  /** The peer's base URL (http://ADDRESS:PORT/, or https:// for TLS peers). */
  url: string;
  wave: string;
  token: string;
  /**
   * Peer links are TLS keyed by the wave's secret: only https:// peers are dialled. Without it, only http://
   * ones: a peer of the other kind is refused undialled, so the token never crosses a plain link of a TLS
   * wave. Default false.
   */
  tls?: boolean;
  index: number;
  /** The chunk's exact length: a body of any other length is refused. */
  length: number;
  /** No byte (or no answer) for this long: the peer stalls. */
  stallMs: number;
  /**
   * The whole chunk must be in within this, however the bytes trickle (a peer dripping a byte now and then
   * never stalls). Default 3 × stallMs: 30 s for 4 MiB at the defaults, about 140 KB/s.
   */
  deadlineMs?: number;
  connections: PeerConnections;
  /** Where the chunk goes: at least `length` bytes (a pooled chunk buffer). */
  into: Buffer;
  signal?: AbortSignal;
}

/** A chunk from a peer: its bytes (a view of `into`) and their SHA-256. */
export interface PeerChunk {
  data: Buffer;
  sha256: string;
}

/**
 * Fetches one chunk of exactly `length` bytes from a peer into `into`, hashing it as it arrives (while the
 * bytes are still in cache, and overlapping the transfer). The caller compares the hash with the anchor.
 * @throws PeerFetchError; the signal's reason when aborted.
 */
export async function fetchFromPeer(options: PeerFetchOptions): Promise<PeerChunk> {
  const { length, into, connections, signal } = options;
  const url = new URL(chunkPath(options.wave, options.index), options.url);
  const origin = url.origin;
  const tls = options.tls === true;
  if ((url.protocol === "https:") !== tls)
    throw new PeerFetchError("refused", `peer ${url.host} is not a ${tls ? "TLS" : "plain HTTP"} peer`);
  let connection: Http1Connection | undefined;
  let late = false;
  const deadlineMs = options.deadlineMs ?? 3 * options.stallMs;
  const deadline = setTimeout(() => {
    late = true;
    connection?.close();
  }, deadlineMs);
  try {
    let response: Http1Response;
    const headers = { authorization: `Bearer ${options.token}`, "accept-encoding": "identity" };
    const reused = connections.take(origin);
    try {
      if (reused === undefined) throw new ConnectionDroppedError("no idle connection");
      connection = reused;
      response = await reused.get(url, headers);
    } catch (error) {
      // An idle keep-alive connection the peer closed just now (the end seen, or a reset answering our
      // request) is no failure of the peer: dial again.
      if (!(error instanceof ConnectionDroppedError) && !(reused !== undefined && isReset(error)))
        throw error;
      reused?.close();
      connection = await Http1Connection.open(url, {
        connectTimeoutMs: options.stallMs,
        stallTimeoutMs: options.stallMs,
        ...(signal === undefined ? {} : { signal }),
        ...(tls ? { tls: peerClientTls(peerKey(options.wave, options.token)) } : {}),
      });
      response = await connection.get(url, headers);
    }
    if (response.status !== 200) {
      await drain(response);
      connections.give(origin, connection);
      connection = undefined;
      const failure: PeerFailure =
        response.status === 503 ? "busy" : response.status === 404 ? "missing" : "refused";
      throw new PeerFetchError(failure, `peer ${url.host} answered ${response.status}`);
    }
    const declared = Number(response.headers["content-length"]);
    if (declared !== length) {
      connection.close();
      throw new PeerFetchError("bad_length", `peer ${url.host} offered ${declared} bytes, not ${length}`);
    }
    const hash = createHash("sha256");
    const target = into.subarray(0, length);
    // The socket reads the body into the chunk's buffer itself: only what came with the headers is copied.
    connection.readInto(target);
    let at = 0;
    for (let piece = await response.read(); piece !== null; piece = await response.read()) {
      if (late) throw new PeerFetchError("stalled", `peer ${url.host} sent no chunk within ${deadlineMs} ms`);
      // Content-Length framing never yields past `length`; the check guards `into` all the same.
      if (at + piece.length > length)
        throw new PeerFetchError("bad_length", `peer ${url.host} sent more than ${length} bytes`);
      hash.update(piece);
      if (piece.buffer !== target.buffer || piece.byteOffset !== target.byteOffset + at)
        piece.copy(target, at);
      at += piece.length;
    }
    // A chunked body may end before the Content-Length it also declared: the rest of `into` is stale.
    if (at !== length)
      throw new PeerFetchError("bad_length", `peer ${url.host} sent ${at} of the chunk's ${length} bytes`);
    connections.give(origin, connection);
    connection = undefined;
    return { data: into.subarray(0, length), sha256: hash.digest("hex") };
  } catch (error) {
    connection?.close();
    signal?.throwIfAborted();
    if (late) throw new PeerFetchError("stalled", `peer ${url.host} sent no chunk within ${deadlineMs} ms`);
    throw asPeerFailure(error, url.host);
  } finally {
    clearTimeout(deadline);
  }
}

function isReset(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === "ECONNRESET" || code === "EPIPE";
}

/** A short refusal's body, so the connection can carry the next request. */
async function drain(response: Http1Response): Promise<void> {
  let left = 64 * 1024;
  for (let piece = await response.read(); piece !== null; piece = await response.read()) {
    left -= piece.length;
    if (left < 0) throw new PeerFetchError("refused", "a peer's refusal has a long body");
  }
}

function asPeerFailure(error: unknown, host: string): PeerFetchError {
  if (error instanceof PeerFetchError) return error;
  const message = `peer ${host}: ${(error as Error).message}`;
  if (error instanceof ImageError && error.code === "http_stall")
    return new PeerFetchError("stalled", message);
  if (error instanceof ImageError && error.code === "http_protocol")
    return new PeerFetchError("refused", message);
  return new PeerFetchError("unreachable", message);
}
