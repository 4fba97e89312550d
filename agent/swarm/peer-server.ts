import { createHash, timingSafeEqual } from "node:crypto";
import { once } from "node:events";
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { Logger } from "../../shared/log.ts";
import { bearerToken, parseChunkPath } from "../../shared/swarm.ts";
import { chunkLength } from "./chunk-cache.ts";
import type { ChunkCache } from "./chunk-cache.ts";
import { peerKey, peerServerTls } from "./peer-tls.ts";

export interface PeerServerOptions {
  /** The address to listen on: the one the agent reaches the conductor from (the provisioning network). */
  host: string;
  /** 0: any free port. */
  port?: number;
  /** Uploads at once; more get 503 and try another peer. Default 4. */
  maxUploads?: number;
  /** A peer that reads nothing for this long is cut. Default 30 s. */
  idleTimeoutMs?: number;
  /** Serve over TLS keyed by the wave's secret (https://), not plain HTTP. Default false. */
  tls?: boolean;
  logger: Logger;
}

/**
 * Serves the chunks this agent holds to the other agents of its wave: `GET /swarm/<wave>/<index>` with the
 * wave's bearer token (compared in constant time, never logged). The bytes are checked against the
 * tracker's anchor hash by whoever takes them, so integrity needs nothing from the link. With `tls` the link
 * is TLS 1.3 keyed by the wave's secret (peer-tls.ts): only members complete a handshake, so the image is
 * not readable on the provisioning network; plain, the token alone keeps non-members out.
 */
export class PeerServer {
  /** Bytes sent to peers. */
  served = 0;
  private uploads = 0;
  private readonly server: Server;
  private wave: { id: string; tokenDigest: Buffer; key: Buffer; cache: ChunkCache } | undefined;

  private constructor(private readonly options: PeerServerOptions) {
    const handle = (req: IncomingMessage, res: ServerResponse): void => this.handle(req, res);
    // the key of the wave served now, for a client naming that wave; anything else fails the handshake
    const keyOf = (identity: string): Buffer | null =>
      this.wave !== undefined && identity === this.wave.id ? this.wave.key : null;
    this.server = options.tls ? createTlsServer(peerServerTls(keyOf), handle) : createServer(handle);
    this.server.requestTimeout = 60_000;
    this.server.headersTimeout = 10_000;
    this.server.keepAliveTimeout = 5_000;
    this.server.maxHeadersCount = 32;
  }

  static async listen(options: PeerServerOptions): Promise<PeerServer> {
    const peer = new PeerServer(options);
    peer.server.listen(options.port ?? 0, options.host);
    await once(peer.server, "listening");
    return peer;
  }

  /** http://HOST:PORT/ (https:// with TLS) as peers dial it. */
  get url(): string {
    const { address, port } = this.server.address() as AddressInfo;
    const scheme = this.options.tls ? "https" : "http";
    return `${scheme}://${address.includes(":") ? `[${address}]` : address}:${port}/`;
  }

  /** What is served from now on: this wave's chunks, to holders of its token (and with TLS, its key). */
  serve(wave: string, token: string, cache: ChunkCache): void {
    this.wave = { id: wave, tokenDigest: digest(token), key: peerKey(wave, token).key, cache };
  }

  async close(): Promise<void> {
    this.wave = undefined;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    res.setHeader("cache-control", "no-store");
    const fail = (status: number): void => {
      res.writeHead(status, { "content-length": 0 }).end();
    };
    if (req.method !== "GET") return fail(405);
    const wave = this.wave;
    const target = parseChunkPath((req.url ?? "").split("?")[0] ?? "");
    const token = bearerToken(req.headers.authorization);
    if (wave === undefined || target === null || target.wave !== wave.id) return fail(404);
    if (token === null || !timingSafeEqual(digest(token), wave.tokenDigest)) return fail(401);
    if (!wave.cache.has(target.index)) return fail(404);
    if (this.uploads >= (this.options.maxUploads ?? 4)) return fail(503);
    // Leased until the response is closed (sent or cut): only then may the chunk's buffer be reused.
    const chunk = wave.cache.lease(target.index);
    if (chunk === undefined) return fail(404);
    this.uploads += 1;
    // on the response, not its socket: a kept-alive socket would gather one listener per request
    res.setTimeout(this.options.idleTimeoutMs ?? 30_000, () => res.destroy());
    res.on("close", () => {
      this.uploads -= 1;
      chunk.release();
    });
    const length = chunkLength(chunk.parts);
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": length });
    res.cork();
    for (const part of chunk.parts) res.write(part);
    res.end(() => {
      this.served += length;
    });
  }
}

/** Equal-length digests, so the comparison takes the same time whatever the token's length. */
function digest(token: string): Buffer {
  return createHash("sha256").update(token).digest();
}
