import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "../../shared/log.ts";
import { silentLogger } from "../../shared/log.ts";
import { HttpStatusError, ImageError, redactQuery } from "./errors.ts";
import { GcPacer } from "./gc-pacer.ts";
import { TRANSFER_DEFAULTS, TransferGuard } from "./transfer-guard.ts";
import { ConnectionDroppedError, Http1Connection } from "./http1.ts";
import type { ByteWindow } from "./extent.ts";
import type { Http1Response } from "./http1.ts";

export interface FetchOptions {
  signal?: AbortSignal;
  /** TCP (and TLS) connect timeout. Default 15 s. */
  connectTimeoutMs?: number;
  /** Fail when no byte (or no response header) arrives for this long while we wait for one. Default 60 s. */
  stallTimeoutMs?: number;
  /** A response's whole head (1xx included), and a chunked body's trailers, must arrive within this. Default 60 s. */
  headersTimeoutMs?: number;
  /** How many dropped connections are resumed with a Range request. Default 5. */
  maxResumes?: number;
  /** How many 5xx answers or failed connects are retried. Default 4. */
  maxRetries?: number;
  /** First retry delay; doubles each time. Default 1 s. */
  retryDelayMs?: number;
  /** PEM certificate(s) trusted for HTTPS image servers, instead of the system's CAs. */
  ca?: string;
  /** Bytes per second the server must average over each rateWindowMs spent waiting for it. Default 64 KiB/s. */
  minBytesPerSecond?: number;
  /** The window the minimum rate is averaged over. Default 60 s. */
  rateWindowMs?: number;
  /** The whole download's deadline. Default: its size at minBytesPerSecond plus deadlineSlackMs. */
  deadlineMs?: number;
  /** Added to the size-derived deadline. Default 5 min. */
  deadlineSlackMs?: number;
  logger?: Logger;
}

const DEFAULTS = {
  connectTimeoutMs: 15_000,
  stallTimeoutMs: 60_000,
  headersTimeoutMs: 60_000,
  maxResumes: 5,
  maxRetries: 4,
  retryDelayMs: 1_000,
  ...TRANSFER_DEFAULTS,
};

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const MAX_REDIRECTS = 5;

/** What several downloads of one object share: a keep-alive connection and the object's identity. */
export class DownloadSession {
  connection: Http1Connection | undefined;
  /** The object's strong ETag, sent as If-Range so that every range comes from the same object. */
  etag: string | undefined;
  /** The object's size, from the first response. */
  objectSize: number | null = null;

  close(): void {
    this.connection?.close();
    this.connection = undefined;
  }
}

/**
 * One image download: iterate it for the body's bytes (the whole object, or one window of it). Each chunk is a
 * view of a reused receive buffer, valid until the iteration continues (copy what must be kept). Dropped
 * connections resume where they stopped (`Range: bytes=N-`, checked against 206 + Content-Range), 5xx and
 * refused connects are retried with backoff, 4xx fail at once; redirects are followed (never from https to
 * http). Downloads that share a session reuse its keep-alive connection. A server slower than the minimum
 * rate over a window, or a download past its deadline, fails (see TransferGuard).
 * @throws HttpStatusError (4xx, or 5xx past maxRetries); ImageError "http_range" when a server ignores Range,
 * "http_stall" on a stall, a too slow server or a missed deadline, "http_connection" past the retry/resume
 * budget; the signal's reason when aborted.
 */
export class ImageDownload implements AsyncIterable<Buffer> {
  /** Bytes this download yields, from Content-Length or Content-Range (or the window), once known. */
  total: number | null = null;
  received = 0;
  resumes = 0;
  /**
   * Where the body's next bytes should land (the free end of the writer's block), asked before each read:
   * the socket then reads straight there and the chunks are views of it, in order, so the consumer copies
   * nothing (measured in docs/images.md). Content-Length bodies only; chunks stay views either way.
   */
  landing: (() => Buffer) | undefined;
  private readonly opts: typeof DEFAULTS & FetchOptions;
  private readonly window: ByteWindow | undefined;
  private readonly session: DownloadSession;
  private readonly sharedSession: boolean;

  constructor(
    readonly url: string,
    options: FetchOptions = {},
    part: { window?: ByteWindow; session?: DownloadSession; from?: number } = {},
  ) {
    this.opts = { ...DEFAULTS, ...stripUndefined(options) };
    this.window = part.window;
    // a resumed write: the object from `from` on, with a Range request, as after a dropped connection
    if (part.from !== undefined && part.window === undefined) this.received = part.from;
    this.session = part.session ?? new DownloadSession();
    this.sharedSession = part.session !== undefined;
    if (this.window) this.total = this.window.end - this.window.start;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    const log = (this.opts.logger ?? silentLogger).child({ url: redactQuery(this.url) });
    const guard = new TransferGuard(this.opts, redactQuery(this.url));
    let complete = false;
    try {
      for (;;) {
        guard.checkDeadline(this.total);
        const response = await guard.waitFor(this.open());
        try {
          for (;;) {
            this.land(response);
            const chunk = await guard.waitFor(response.read());
            if (chunk === null) break;
            this.received += chunk.length;
            guard.received(chunk.length, this.total);
            yield chunk;
          }
          if (this.total === null || this.received >= this.total) {
            complete = true;
            return;
          }
          throw new ConnectionDroppedError(`body ended at ${this.received} of ${this.total} bytes`);
        } catch (error) {
          this.close();
          if (this.opts.signal?.aborted) throw this.opts.signal.reason;
          if (!(error instanceof ConnectionDroppedError)) throw error;
          if (this.resumes >= this.opts.maxResumes) {
            throw new ImageError(
              `download of ${redactQuery(this.url)} broke ${this.resumes + 1} times (last: ${error.message})`,
              "http_connection",
              true,
            );
          }
          this.resumes += 1;
          log.warn(
            { at: this.received, resume: this.resumes, reason: error.message },
            "download dropped, resuming",
          );
        }
      }
    } finally {
      // A finished body leaves a keep-alive connection for a shared session's next download; a download on
      // its own closes it (an idle socket would keep the process alive).
      if (!complete || !this.sharedSession || !this.session.connection?.reusable) this.close();
    }
  }

  /** Points the socket's next reads at `landing`'s buffer, when there is one and the body's length is known. */
  private land(response: Http1Response): void {
    const connection = this.session.connection;
    if (this.landing === undefined || connection === undefined || connection.receivingInto) return;
    if (this.total === null || response.headers["transfer-encoding"] !== undefined) return;
    const left = this.total - this.received;
    if (left <= 0) return;
    const target = this.landing();
    if (target.length > 0) connection.readInto(target.subarray(0, Math.min(target.length, left)));
  }

  /** Drops the connection (when the consumer gives up without finishing the iteration). */
  close(): void {
    this.session.close();
  }

  /** Sends the GET (from `received` on) and returns once acceptable headers are in, retrying 5xx/connects. */
  private async open(): Promise<Http1Response> {
    for (let attempt = 0; ; attempt += 1) {
      this.opts.signal?.throwIfAborted();
      try {
        return await this.openOnce();
      } catch (error) {
        this.close();
        if (this.opts.signal?.aborted) throw this.opts.signal.reason;
        const retryable =
          (error instanceof HttpStatusError && error.status >= 500) || isTransientNetworkError(error);
        if (!retryable || attempt >= this.opts.maxRetries) throw wrapConnectError(error, this.url);
        const delay = this.opts.retryDelayMs * 2 ** attempt;
        (this.opts.logger ?? silentLogger).warn(
          { url: redactQuery(this.url), attempt: attempt + 1, delay_ms: delay, error: String(error) },
          "image server failed, retrying",
        );
        await sleep(delay, undefined, { signal: this.opts.signal });
      }
    }
  }

  private async openOnce(): Promise<Http1Response> {
    const from = (this.window?.start ?? 0) + this.received;
    const headers: Record<string, string> = { "accept-encoding": "identity" };
    if (this.window) headers.range = `bytes=${from}-${this.window.end - 1}`;
    else if (from > 0) headers.range = `bytes=${from}-`;
    if (headers.range !== undefined && this.session.etag !== undefined)
      headers["if-range"] = this.session.etag;
    let url = new URL(this.url);
    for (let hops = 0; ; hops += 1) {
      const response = await this.request(url, headers);
      const location = response.headers.location;
      if (REDIRECTS.has(response.status) && location !== undefined) {
        this.close();
        if (hops >= MAX_REDIRECTS) {
          throw new ImageError(
            `${redactQuery(this.url)} redirected more than ${MAX_REDIRECTS} times`,
            "http_status",
          );
        }
        url = redirectTarget(url, location);
        continue;
      }
      this.accept(response, from, headers.range);
      return response;
    }
  }

  /** One GET on the session's connection when it is still open to that origin, else on a new one. */
  private async request(url: URL, headers: Record<string, string>): Promise<Http1Response> {
    const idle = this.session.connection;
    if (idle?.reusable && idle.origin.origin === url.origin) {
      try {
        return await idle.get(url, headers);
      } catch (error) {
        // The server may have closed an idle keep-alive connection just now: that is no failure.
        if (!(error instanceof ConnectionDroppedError)) throw error;
        this.close();
      }
    } else this.close();
    this.session.connection = await Http1Connection.open(url, this.opts);
    return this.session.connection.get(url, headers);
  }

  /** Checks status and Content-Range against what we asked for; learns the lengths and the ETag. */
  private accept(response: Http1Response, from: number, range: string | undefined): void {
    const { status, headers } = response;
    // Only these carry the object's bytes: a 204, 203 or 226 would write something else (or nothing).
    if (status !== 200 && status !== 206) throw new HttpStatusError(this.url, status);
    if (this.session.objectSize === null) {
      const etag = headers.etag;
      if (etag !== undefined && !etag.startsWith("W/")) this.session.etag = etag;
    }
    if (range === undefined) {
      const length = headers["content-length"];
      if (status === 200 && length !== undefined) this.total = Number(length);
      if (status === 206) this.total = contentRangeTotal(headers["content-range"], 0);
      this.session.objectSize = this.total;
      return;
    }
    if (status !== 206) {
      // A 200 here is the whole object again (Range ignored, or If-Range saw a different object):
      // splicing it at `from` would corrupt the disk.
      throw new ImageError(
        `server answered ${status} to "Range: ${range}" for ${redactQuery(this.url)}; cannot resume safely`,
        "http_range",
      );
    }
    const size = contentRangeTotal(headers["content-range"], from);
    if (this.session.objectSize !== null && size !== null && size !== this.session.objectSize) {
      throw new ImageError(
        `object size changed from ${this.session.objectSize} to ${size} during download`,
        "http_range",
      );
    }
    this.session.objectSize ??= size;
    this.total ??= size;
  }
}

/** Copies each chunk, for consumers that keep chunks past the next read (decompressors, the qcow2 converter). */
export async function* ownedChunks(source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const pacer = new GcPacer();
  for await (const chunk of source) {
    pacer.allocated(chunk.length);
    yield Buffer.from(chunk);
  }
}

/**
 * Resolves a Location against the URL that answered it, allowing only http→http(s) and https→https (a
 * redirect may not downgrade TLS nor leave HTTP: file:, data:, ftp: and friends are refused), and no
 * credentials in the URL. The fragment is dropped.
 * @throws ImageError "http_protocol"
 */
export function redirectTarget(from: URL, location: string): URL {
  let to: URL;
  try {
    to = new URL(location, from);
  } catch {
    throw new ImageError(`${redactQuery(from.href)} redirected to an invalid URL`, "http_protocol");
  }
  const allowed = from.protocol === "https:" ? ["https:"] : ["http:", "https:"];
  if (!allowed.includes(to.protocol)) {
    throw new ImageError(
      `${redactQuery(from.href)} redirected from ${from.protocol} to ${to.protocol.slice(0, 20)}, which is refused`,
      "http_protocol",
    );
  }
  if (to.username !== "" || to.password !== "") {
    throw new ImageError(`${redactQuery(from.href)} redirected to a URL with credentials`, "http_protocol");
  }
  to.hash = "";
  return to;
}

/** Parses "bytes START-END/TOTAL", insisting START is what we asked for. */
function contentRangeTotal(header: string | undefined, start: number): number | null {
  const match = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(header ?? "");
  if (!match || Number(match[1]) !== start) {
    throw new ImageError(
      `bad Content-Range "${header ?? ""}" for a request from byte ${start}`,
      "http_range",
    );
  }
  return match[3] === "*" ? null : Number(match[3]);
}

const TRANSIENT_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EAI_AGAIN",
  "ENETUNREACH",
  "EHOSTUNREACH",
  "ENOTFOUND",
]);

/** Worth another try: the network, not the request (a TLS verification failure or a bad URL is not). */
function isTransientNetworkError(error: unknown): boolean {
  if (!(error instanceof Error) || error instanceof ImageError) return false;
  if (error instanceof ConnectionDroppedError) return true;
  const code = (error as { code?: string }).code;
  return code !== undefined && TRANSIENT_CODES.has(code);
}

function wrapConnectError(error: unknown, url: string): unknown {
  if (error instanceof ImageError || !(error instanceof Error) || error.name === "AbortError") return error;
  if ((error as { code?: string }).code === "ABORT_ERR") return error;
  return new ImageError(`cannot download ${redactQuery(url)}: ${error.message}`, "http_connection", true);
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * Fetches a small document whole (a checksum file, a config drive), with the same timeouts and retries.
 * @throws ImageError when it is larger than maxBytes (default 1 MiB); as ImageDownload otherwise
 */
export async function fetchSmall(
  url: string,
  options: FetchOptions & { maxBytes?: number } = {},
): Promise<Buffer> {
  const maxBytes = options.maxBytes ?? 1 << 20;
  const parts: Buffer[] = [];
  let size = 0;
  const download = new ImageDownload(url, options);
  for await (const chunk of download) {
    size += chunk.length;
    if (size > maxBytes) {
      download.close();
      throw new ImageError(`${redactQuery(url)} is larger than ${maxBytes} bytes`, "image_format");
    }
    parts.push(Buffer.from(chunk)); // a view of a reused buffer: copy it
  }
  return Buffer.concat(parts);
}

/** fetchSmall, as UTF-8 text. */
export async function fetchText(url: string, options: FetchOptions = {}): Promise<string> {
  return (await fetchSmall(url, options)).toString("utf8");
}
