import { setTimeout as sleep } from "node:timers/promises";
import got from "got";
import type { Request as GotRequest } from "got";
import type { IncomingMessage } from "node:http";
import type { Logger } from "../../shared/log.ts";
import { silentLogger } from "../../shared/log.ts";
import { HttpStatusError, ImageError, redactQuery } from "./errors.ts";

export interface FetchOptions {
  signal?: AbortSignal;
  /** TCP (and TLS) connect timeout. Default 15 s. */
  connectTimeoutMs?: number;
  /** Fail when no byte (or no response header) arrives for this long while we wait for one. Default 60 s. */
  stallTimeoutMs?: number;
  /** How many dropped connections are resumed with a Range request. Default 5. */
  maxResumes?: number;
  /** How many 5xx answers or failed connects are retried. Default 4. */
  maxRetries?: number;
  /** First retry delay; doubles each time. Default 1 s. */
  retryDelayMs?: number;
  /** PEM certificate(s) trusted for HTTPS image servers, instead of the system's CAs. */
  ca?: string;
  logger?: Logger;
}

const DEFAULTS = {
  connectTimeoutMs: 15_000,
  stallTimeoutMs: 60_000,
  maxResumes: 5,
  maxRetries: 4,
  retryDelayMs: 1_000,
};

/** A connection that broke after headers: resumable with Range. */
class DroppedError extends Error {}

/**
 * One image download: iterate it for the body's bytes. Dropped connections resume where they stopped
 * (`Range: bytes=N-`, checked against 206 + Content-Range), 5xx and refused connects are retried with
 * backoff, 4xx fail at once.
 * @throws HttpStatusError (4xx, or 5xx past maxRetries); ImageError "http_range" when a server ignores Range,
 * "http_stall" on a stall, "http_connection" past the retry/resume budget; the signal's reason when aborted.
 */
export class ImageDownload implements AsyncIterable<Buffer> {
  /** Body length, from Content-Length or Content-Range, once the first response is in. */
  total: number | null = null;
  received = 0;
  resumes = 0;
  private readonly opts: typeof DEFAULTS & FetchOptions;
  private etag: string | undefined;
  private active: { request: GotRequest; watchdog?: NodeJS.Timeout } | undefined;

  constructor(
    readonly url: string,
    options: FetchOptions = {},
  ) {
    this.opts = { ...DEFAULTS, ...stripUndefined(options) };
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    const log = (this.opts.logger ?? silentLogger).child({ url: redactQuery(this.url) });
    for (;;) {
      const request = await this.open();
      this.active = { request };
      try {
        yield* this.body(request);
        if (this.total === null || this.received >= this.total) return;
        throw new DroppedError(`body ended at ${this.received} of ${this.total} bytes`);
      } catch (error) {
        request.destroy();
        if (this.opts.signal?.aborted) throw this.opts.signal.reason;
        if (!(error instanceof DroppedError)) throw error;
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
  }

  /** Drops the connection and its watchdog (when the consumer gives up without finishing the iteration). */
  close(): void {
    clearInterval(this.active?.watchdog);
    this.active?.request.destroy();
    this.active = undefined;
  }

  /** Sends the GET (from `received` on) and returns once acceptable headers are in, retrying 5xx/connects. */
  private async open(): Promise<GotRequest> {
    for (let attempt = 0; ; attempt += 1) {
      this.opts.signal?.throwIfAborted();
      try {
        return await this.openOnce();
      } catch (error) {
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

  private openOnce(): Promise<GotRequest> {
    const start = this.received;
    const headers: Record<string, string> = { "accept-encoding": "identity" };
    if (start > 0) {
      headers.range = `bytes=${start}-`;
      if (this.etag !== undefined) headers["if-range"] = this.etag;
    }
    const request = got.stream(this.url, {
      headers,
      decompress: false,
      throwHttpErrors: false,
      retry: { limit: 0 },
      timeout: {
        lookup: this.opts.connectTimeoutMs,
        connect: this.opts.connectTimeoutMs,
        secureConnect: this.opts.connectTimeoutMs,
        response: this.opts.stallTimeoutMs,
      },
      signal: this.opts.signal,
      ...(this.opts.ca === undefined ? {} : { https: { certificateAuthority: this.opts.ca } }),
    });
    return new Promise((resolve, reject) => {
      const fail = (error: unknown): void => {
        request.destroy();
        if (isTimeout(error, "response")) {
          reject(
            new ImageError(
              `no response from ${redactQuery(this.url)} in ${this.opts.stallTimeoutMs} ms`,
              "http_stall",
              true,
            ),
          );
        } else reject(error);
      };
      request.once("error", fail);
      request.once("response", (response: IncomingMessage) => {
        request.off("error", fail);
        try {
          this.accept(response, start);
          resolve(request);
        } catch (error) {
          fail(error);
        }
      });
    });
  }

  /** Checks status and Content-Range against what we asked for; learns the total length. */
  private accept(response: IncomingMessage, start: number): void {
    const status = response.statusCode ?? 0;
    if (status >= 300) throw new HttpStatusError(this.url, status);
    if (start === 0) {
      const length = response.headers["content-length"];
      if (status === 200 && length !== undefined) this.total = Number(length);
      const etag = response.headers.etag;
      if (etag !== undefined && !etag.startsWith("W/")) this.etag = etag;
      if (status === 206) this.total = contentRangeTotal(response.headers["content-range"], 0);
      return;
    }
    if (status !== 206) {
      // A 200 here is the whole object again (Range ignored, or If-Range saw a different object):
      // splicing it at `start` would corrupt the disk.
      throw new ImageError(
        `server answered ${status} to "Range: bytes=${start}-" for ${redactQuery(this.url)}; cannot resume safely`,
        "http_range",
      );
    }
    const total = contentRangeTotal(response.headers["content-range"], start);
    if (this.total !== null && total !== null && total !== this.total) {
      throw new ImageError(
        `object size changed from ${this.total} to ${total} during download`,
        "http_range",
      );
    }
  }

  /** Yields the body, failing on a stall; connection errors become DroppedError (resumable). */
  private async *body(request: GotRequest): AsyncGenerator<Buffer> {
    const iterator = request[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    const stallMs = this.opts.stallTimeoutMs;
    // One watchdog per response, not a timer per chunk: it only counts time spent waiting for the server,
    // never time the consumer (the disk) holds us back.
    let waitingSince: number | undefined;
    let stall: ImageError | undefined;
    const watchdog = setInterval(
      () => {
        if (waitingSince === undefined || Date.now() - waitingSince < stallMs) return;
        stall = new ImageError(
          `no data from ${redactQuery(this.url)} for ${stallMs} ms at byte ${this.received}`,
          "http_stall",
          true,
        );
        request.destroy(stall);
      },
      Math.max(10, Math.min(1_000, stallMs / 4)),
    );
    watchdog.unref();
    if (this.active) this.active.watchdog = watchdog;
    try {
      for (;;) {
        let step: IteratorResult<Buffer>;
        waitingSince = Date.now();
        try {
          step = await iterator.next();
        } catch (error) {
          if (stall) throw stall;
          if (error instanceof ImageError || this.opts.signal?.aborted) throw error;
          throw new DroppedError(error instanceof Error ? error.message : String(error));
        }
        waitingSince = undefined;
        if (step.done) return;
        this.received += step.value.length;
        yield step.value;
      }
    } finally {
      clearInterval(watchdog);
    }
  }
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
  const code = (error as { code?: string }).code;
  return error.name === "TimeoutError" || (code !== undefined && TRANSIENT_CODES.has(code));
}

function isTimeout(error: unknown, event: string): boolean {
  return (
    error instanceof Error &&
    error.name === "TimeoutError" &&
    (error as Error & { event?: string }).event === event
  );
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
    parts.push(chunk);
  }
  return Buffer.concat(parts);
}

/** fetchSmall, as UTF-8 text. */
export async function fetchText(url: string, options: FetchOptions = {}): Promise<string> {
  return (await fetchSmall(url, options)).toString("utf8");
}
