import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { imageObjectUrl } from "../../shared/image.ts";
import type { Logger } from "../../shared/log.ts";
import type { SwarmAnswer, SwarmDropReason, SwarmRequest, SwarmStats } from "../../shared/swarm.ts";
import { redactQuery } from "../image/errors.ts";
import { DownloadSession, ImageDownload } from "../image/fetch.ts";
import type { FetchOptions } from "../image/fetch.ts";
import type { ByteWindow } from "../image/extent.ts";
import { ChunkCache, ChunkPool, HeldChunk } from "./chunk-cache.ts";
import { PeerConnections, PeerFetchError, fetchFromPeer } from "./peer-fetch.ts";
import type { PeerChunk } from "./peer-fetch.ts";
import { PeerServer } from "./peer-server.ts";
import type { SwarmLink } from "./swarm-link.ts";

/** A chunk held for a caller: its bytes, the peer that served them (undefined: the store); release once read. */
export interface TakenChunk {
  index: number;
  data: Buffer;
  peer: string | undefined;
  release(): void;
}

/**
 * A test of a chunk's bytes (at `window` of the image) against hashes the node trusts without the tracker:
 * a message saying what failed, or undefined when they pass.
 */
export type ChunkCheck = (window: ByteWindow, data: Buffer) => string | undefined;

export interface OpenSwarmOptions {
  url: string;
  /** "algo:value" of the whole-image checksum, part of the wave's identity. */
  checksum?: string | undefined;
  link: SwarmLink;
  request: SwarmRequest;
  /** The write's fetch options (timeouts, CA, signal, logger): the store is reached as without a swarm. */
  fetch: FetchOptions;
  logger: Logger;
}

interface Settings {
  window: number;
  peerStallMs: number;
  cacheBytes: number;
  lingerMs: number;
  askTimeoutMs: number;
  /** Peer links are TLS keyed by the wave's secret (the link to the conductor is TLS, peer_tls not off). */
  tls: boolean;
}

/** The pieces the image pipeline gets: small enough to stay in the CPU's cache between its hash and copy. */
const YIELD_BYTES = 256 * 1024;

/** Rounds of asking the tracker again when every peer it named was busy, before the store. */
const BUSY_ROUNDS = 8;

/**
 * Joins the image's wave and returns the chunk source, or undefined when there is no swarm to join (no
 * tracker, swarm off, the store does not say the object's size): the caller then downloads as ever.
 */
export async function openSwarm(options: OpenSwarmOptions): Promise<SwarmSource | undefined> {
  const { link, logger, request } = options;
  const host = link.localAddress();
  if (host === undefined) {
    logger.info("no swarm: the link to the conductor is down");
    return undefined;
  }
  const size = await objectSize(options.url, options.fetch, logger);
  if (size === null || size === 0) {
    logger.info("no swarm: the store does not tell the image's size");
    return undefined;
  }
  const settings: Settings = {
    window: request.window ?? 4,
    peerStallMs: (request.peer_stall_s ?? 10) * 1000,
    cacheBytes: request.cache_bytes ?? 256 * 1024 * 1024,
    lingerMs: (request.linger_s ?? 60) * 1000,
    askTimeoutMs: (request.ask_timeout_s ?? 60) * 1000,
    tls: request.peer_tls !== "off" && link.secure(),
  };
  const server = await PeerServer.listen({
    host,
    tls: settings.tls,
    maxUploads: request.max_uploads ?? 4,
    logger,
  });
  let answer: SwarmAnswer;
  try {
    answer = await link.ask(
      {
        type: "swarm_join",
        image: imageObjectUrl(options.url),
        ...(options.checksum === undefined ? {} : { checksum: options.checksum }),
        size,
        endpoint: server.url,
      },
      settings.askTimeoutMs,
    );
  } catch (error) {
    await server.close();
    logger.info({ err: (error as Error).message }, "no swarm: the tracker did not answer");
    return undefined;
  }
  if (answer.kind !== "joined") {
    await server.close();
    logger.info({ answer: answer.kind === "refused" ? answer.message : answer.kind }, "no swarm");
    return undefined;
  }
  logger.info({ wave: answer.wave, size, endpoint: server.url }, "joined a swarm wave");
  return new SwarmSource(options, {
    size,
    server,
    settings,
    wave: answer.wave,
    token: answer.token,
    chunkBytes: answer.chunk_bytes,
  });
}

/**
 * The image's bytes, in order, chunk by chunk from peers or the store, a window of chunks in flight. Each
 * chunk from a peer must hash to the tracker's anchor (the SHA-256 its assignee saw from the store), or it is
 * refetched from the store and the peer dropped for the wave. When the tracker is gone the rest comes from the
 * store. Iterate it once; then finish() (it keeps serving for a while) or abandon().
 */
export class SwarmSource implements AsyncIterable<Buffer> {
  readonly total: number;
  received = 0;
  readonly stats: SwarmStats;
  private readonly cache: ChunkCache;
  private readonly pool: ChunkPool;
  private readonly stop = new AbortController();
  private readonly signal: AbortSignal;
  private readonly sessions: DownloadSession[] = [];
  private readonly dropped = new Map<string, SwarmDropReason>();
  private readonly connections = new PeerConnections();
  private fallback: string | undefined;
  private readonly log: Logger;

  constructor(
    private readonly options: OpenSwarmOptions,
    private readonly wave: {
      size: number;
      server: PeerServer;
      settings: Settings;
      wave: string;
      token: string;
      chunkBytes: number;
    },
  ) {
    this.total = wave.size;
    this.log = options.logger.child({ wave: wave.wave });
    this.signal =
      options.fetch.signal === undefined
        ? this.stop.signal
        : AbortSignal.any([options.fetch.signal, this.stop.signal]);
    this.pool = new ChunkPool(wave.chunkBytes);
    this.cache = new ChunkCache(wave.settings.cacheBytes, (index) =>
      options.link.notify({ type: "swarm_drop", wave: wave.wave, index, reason: "evicted" }),
    );
    wave.server.serve(wave.wave, wave.token, this.cache);
    this.stats = {
      wave: wave.wave,
      chunk_bytes: wave.chunkBytes,
      bytes_from_store: 0,
      bytes_from_peers: 0,
      per_peer: {},
      bytes_served: 0,
      bad_chunks: 0,
      dropped_peers: {},
      chunks_from_store: 0,
      chunks_from_peers: 0,
      busy_answers: 0,
      ask_ms: 0,
      peer_ms: 0,
      store_ms: 0,
      starved_ms: 0,
    };
  }

  /**
   * The image's bytes in pieces of at most YIELD_BYTES: each is a view of a pooled chunk buffer, valid until
   * the next iteration step (like a download's views of its receive ring).
   */
  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    const count = Math.ceil(this.total / this.wave.chunkBytes);
    const first = this.received / this.wave.chunkBytes;
    const all = Array.from({ length: count - first }, (_, index) => first + index);
    for await (const chunk of this.chunks(all)) {
      try {
        // Small pieces: the consumer hashes then copies each while it is still in the CPU's cache.
        for (let at = 0; at < chunk.data.length; at += YIELD_BYTES) {
          const piece = chunk.data.subarray(at, at + YIELD_BYTES);
          this.received += piece.length;
          yield piece;
        }
      } finally {
        chunk.release();
      }
    }
  }

  /**
   * The bytes from `offset` on only (a resumed write's rest): the iteration starts at that chunk. Call before
   * iterating. @throws RangeError unless `offset` is a chunk's start within the image
   */
  startAt(offset: number): void {
    if (offset % this.wave.chunkBytes !== 0 || offset < 0 || offset > this.total)
      throw new RangeError(`a swarm read starts at a chunk's start, not at byte ${offset}`);
    this.received = offset;
  }

  /** Bytes per chunk in this wave (the tracker's). */
  get chunkBytes(): number {
    return this.wave.chunkBytes;
  }

  /**
   * Chunks `indices` (ascending), a window of them in flight, each held for the caller until it calls
   * `release` (several may be held at once). `check` is a test the node trusts on its own (a block map's
   * range digests): a peer's chunk must pass it as well as match its anchor, or it is refetched from the
   * store and the peer dropped for bad bytes. Stopping early stops the chunks in flight.
   */
  async *chunks(indices: readonly number[], check?: ChunkCheck): AsyncGenerator<TakenChunk> {
    const inflight: Array<Promise<TakenChunk>> = [];
    let next = 0;
    let done = false;
    try {
      for (let at = 0; at < indices.length; at++) {
        while (next < indices.length && next < at + this.wave.settings.window) {
          const pending = this.chunk(indices[next] as number, check);
          pending.catch(() => undefined); // awaited in order below; a later one's failure waits its turn
          inflight.push(pending);
          next += 1;
        }
        const waiting = performance.now();
        const chunk = await (inflight.shift() as Promise<TakenChunk>);
        this.count("starved_ms", performance.now() - waiting);
        // the last one handed out, nothing is left in flight: a consumer stopping now stops nothing
        if (at === indices.length - 1) done = true;
        yield chunk;
      }
    } finally {
      if (!done) this.close();
      // Chunks fetched ahead and never consumed go back to the pool once they arrive.
      for (const pending of inflight)
        pending.then(
          (chunk) => chunk.release(),
          () => undefined,
        );
    }
  }

  /**
   * `chunk` again, from the store, after its bytes failed a test the node trusts (a block map's digest of a
   * range across several chunks) though they matched the anchor. Same bytes as the store's: `chunk` itself is
   * returned. Else the store's copy replaces it: the peer that served it is dropped for bad bytes and this
   * agent stops holding and serving the chunk (the store's copy does not match the anchor, so it is not
   * offered either).
   */
  async repair(chunk: TakenChunk): Promise<TakenChunk> {
    const store = await this.fromStore(chunk.index, false, false);
    if (chunk.peer === undefined || (store.parts[0] as Buffer).equals(chunk.data)) {
      store.release();
      return chunk;
    }
    this.stats.bad_chunks += 1;
    this.dropPeer(chunk.peer, chunk.index, {
      reason: "bad_bytes",
      message: `chunk ${chunk.index} matched its anchor but not the block map's digest: the anchor is wrong`,
    });
    if (this.cache.delete(chunk.index))
      this.options.link.notify({
        type: "swarm_drop",
        wave: this.wave.wave,
        index: chunk.index,
        reason: "evicted",
      });
    chunk.release();
    return this.taken(chunk.index, store, undefined);
  }

  /** Bytes a block-mapped write took from the store outside the shared chunks (sparse chunks' ranges). */
  countStoreBytes(bytes: number): void {
    this.stats.bytes_from_store += bytes;
  }

  /** Stops the chunks in flight (the consumer gave up). */
  close(): void {
    this.stop.abort(new Error("image stream closed"));
    for (const session of this.sessions) session.close();
    this.connections.close();
  }

  /** The write succeeded: the figures, and the chunks stay served for the linger time, then the wave is left. */
  finish(): SwarmStats {
    this.stats.bytes_served = this.wave.server.served;
    for (const figure of ["ask_ms", "peer_ms", "store_ms", "starved_ms"] as const)
      this.stats[figure] = Math.round(this.stats[figure] ?? 0);
    const timer = setTimeout(() => void this.abandon(), this.wave.settings.lingerMs);
    timer.unref();
    return { ...this.stats };
  }

  /** Leaves the wave now: no more serving, the cache freed. */
  async abandon(): Promise<void> {
    this.close();
    this.options.link.notify({ type: "swarm_leave", wave: this.wave.wave });
    this.cache.clear();
    this.pool.clear();
    this.connections.close();
    await this.wave.server.close();
  }

  /** Chunk `index`, held for the caller (release it once read). */
  private async chunk(index: number, check?: ChunkCheck): Promise<TakenChunk> {
    const excluded = new Set<string>();
    for (let round = 0; this.fallback === undefined && round < BUSY_ROUNDS; round++) {
      let answer: SwarmAnswer;
      const asked = performance.now();
      try {
        answer = await this.options.link.ask(
          { type: "swarm_ask", wave: this.wave.wave, index },
          this.wave.settings.askTimeoutMs,
        );
        this.count("ask_ms", performance.now() - asked);
      } catch (error) {
        this.giveUp(`tracker unreachable: ${(error as Error).message}`);
        break;
      }
      this.signal.throwIfAborted();
      if (answer.kind === "refused") {
        this.giveUp(`tracker refused: ${answer.message}`);
        break;
      }
      if (answer.kind !== "peers") return this.taken(index, await this.fromStore(index, true), undefined);
      const chunk = await this.fromPeers(index, answer, { excluded, check });
      if (chunk !== undefined) return chunk;
      await sleep(25 * (round + 1), undefined, { signal: this.signal });
    }
    return this.taken(index, await this.fromStore(index, this.fallback === undefined), undefined);
  }

  private taken(index: number, held: HeldChunk, peer: string | undefined): TakenChunk {
    return { index, data: held.parts[0] as Buffer, peer, release: () => held.release() };
  }

  private range(index: number): { start: number; end: number } {
    const start = index * this.wave.chunkBytes;
    return { start, end: Math.min(this.total, start + this.wave.chunkBytes) };
  }

  /** The chunk from the store; `announce`: tell the tracker (its assignee's hash), `keep`: cache and serve it. */
  private async fromStore(index: number, announce: boolean, keep = true): Promise<HeldChunk> {
    const { start, end } = this.range(index);
    const session = this.sessions.pop() ?? new DownloadSession();
    // The download's parts are views of a reused buffer: each is copied into a pooled chunk buffer.
    const buffer = this.pool.take();
    const hash = createHash("sha256");
    const started = performance.now();
    let at = 0;
    try {
      const download = new ImageDownload(
        this.options.url,
        { ...this.options.fetch, signal: this.signal },
        { window: { start, end }, session },
      );
      for await (const part of download) {
        if (at + part.length > end - start) throw new Error("the store sent more than the range asked for");
        hash.update(part);
        part.copy(buffer, at);
        at += part.length;
      }
      if (at !== end - start) throw new Error(`the store sent ${at} of the range's ${end - start} bytes`);
      this.sessions.push(session);
    } catch (error) {
      this.pool.give(buffer);
      session.close();
      if (announce)
        this.options.link.notify({ type: "swarm_drop", wave: this.wave.wave, index, reason: "failed" });
      throw error;
    }
    this.stats.bytes_from_store += at;
    this.count("chunks_from_store", 1);
    this.count("store_ms", performance.now() - started);
    const digest = hash.digest("hex");
    const chunk = this.held(buffer.subarray(0, at), buffer);
    if (keep) this.keep(index, chunk, { digest, ...(announce ? { source: "store" as const } : {}) });
    return chunk;
  }

  /** `data` (a view of the pooled `buffer`), held once for the caller; the buffer is pooled again when freed. */
  private held(data: Buffer, buffer: Buffer): HeldChunk {
    return new HeldChunk([data], () => this.pool.give(buffer));
  }

  /**
   * The chunk from the first named peer whose bytes hash to the anchor (and pass `check`); undefined when
   * none gave it.
   */
  private async fromPeers(
    index: number,
    answer: Extract<SwarmAnswer, { kind: "peers" }>,
    trust: { excluded: Set<string>; check: ChunkCheck | undefined },
  ): Promise<TakenChunk | undefined> {
    const { excluded, check } = trust;
    const { start, end } = this.range(index);
    for (const peer of answer.peers) {
      if (this.dropped.has(peer.node) || excluded.has(peer.node)) continue;
      let chunk: PeerChunk;
      const buffer = this.pool.take();
      const started = performance.now();
      try {
        chunk = await fetchFromPeer({
          url: peer.url,
          wave: this.wave.wave,
          token: this.wave.token,
          tls: this.wave.settings.tls,
          index,
          length: end - start,
          stallMs: this.wave.settings.peerStallMs,
          connections: this.connections,
          into: buffer,
          signal: this.signal,
        });
      } catch (error) {
        this.pool.give(buffer);
        this.signal.throwIfAborted();
        if (!(error instanceof PeerFetchError)) throw error;
        // busy (at its upload bound) is worth asking again next round; the rest is not, for this chunk
        if (error.failure === "busy") {
          this.count("busy_answers", 1);
          continue;
        }
        excluded.add(peer.node);
        if (error.failure === "missing") {
          this.options.link.notify({
            type: "swarm_drop",
            wave: this.wave.wave,
            index,
            peer: peer.node,
            reason: "unreachable",
          });
          continue;
        }
        this.dropPeer(peer.node, index, {
          reason: error.failure === "stalled" ? "stalled" : "unreachable",
          message: error.message,
        });
        continue;
      }
      const wrong =
        chunk.sha256 !== answer.sha256
          ? `chunk ${index} does not hash to its anchor`
          : check?.({ start, end }, chunk.data);
      if (wrong !== undefined) {
        this.pool.give(buffer);
        this.stats.bad_chunks += 1;
        this.dropPeer(peer.node, index, { reason: "bad_bytes", message: wrong });
        continue;
      }
      const length = end - start;
      this.count("peer_ms", performance.now() - started);
      this.count("chunks_from_peers", 1);
      this.stats.bytes_from_peers += length;
      this.stats.per_peer[peer.node] = (this.stats.per_peer[peer.node] ?? 0) + length;
      const held = this.held(chunk.data, buffer);
      this.keep(index, held, { digest: chunk.sha256, source: "peer" });
      return this.taken(index, held, peer.node);
    }
    return undefined;
  }

  private count(
    figure:
      | "chunks_from_store"
      | "chunks_from_peers"
      | "busy_answers"
      | "ask_ms"
      | "peer_ms"
      | "store_ms"
      | "starved_ms",
    amount: number,
  ): void {
    this.stats[figure] = (this.stats[figure] ?? 0) + amount;
  }

  private keep(index: number, chunk: HeldChunk, from: { digest: string; source?: "store" | "peer" }): void {
    const { digest, source } = from;
    if (!this.cache.put(index, chunk) || source === undefined) return;
    this.options.link.notify({
      type: "swarm_have",
      wave: this.wave.wave,
      index,
      sha256: digest,
      store: source === "store",
    });
  }

  private dropPeer(node: string, index: number, why: { reason: SwarmDropReason; message: string }): void {
    const { reason, message } = why;
    if (this.dropped.has(node)) return;
    this.dropped.set(node, reason);
    this.stats.dropped_peers[node] = reason;
    this.log.warn({ peer: node, index, reason, err: message }, "swarm peer dropped for the wave");
    this.options.link.notify({ type: "swarm_drop", wave: this.wave.wave, index, peer: node, reason });
  }

  /** The tracker is gone (restarted, link down, refused): every chunk still to come is the store's. */
  private giveUp(reason: string): void {
    if (this.fallback !== undefined) return;
    this.fallback = reason;
    this.stats.fallback = reason;
    this.log.warn({ reason }, "swarm tracker lost: the rest of the image comes from the store");
  }
}

/** The object's size from a one-byte Range request (Content-Range's total), or null when the store hides it. */
async function objectSize(url: string, fetch: FetchOptions, logger: Logger): Promise<number | null> {
  const session = new DownloadSession();
  try {
    const probe = new ImageDownload(url, fetch, { window: { start: 0, end: 1 }, session });
    for await (const _ of probe) {
      // one byte
    }
    return session.objectSize;
  } catch (error) {
    logger.info({ url: redactQuery(url), err: (error as Error).message }, "swarm size probe failed");
    return null;
  } finally {
    session.close();
  }
}
