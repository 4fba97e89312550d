import { createHash, randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, readdir, rename, stat, unlink, utimes } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ChecksumAlgo } from "../../shared/image.ts";
import { Invalid } from "../errors.ts";

/**
 * What a cached image must match: its digest when the source gives one (Glance always does; an operator's
 * virtual media URL has none), its size when the source says.
 */
export interface Expected {
  checksum: { algo: ChecksumAlgo; value: string } | null;
  size?: number | null;
}

/** A cached image held for one user (a deploy): it is not evicted until released. */
export interface CacheLease {
  /** The file's name in the cache directory (served as /image-cache/<name>). */
  name: string;
  size: number;
  /** True when this lease started the download (a miss). */
  downloaded: boolean;
  release(): void;
}

/** Counters for measurement and metrics. */
export interface CacheStats {
  hits: number;
  misses: number;
  /** Downloads joined by a second caller while running (coalesced). */
  joined: number;
  bytesDownloaded: number;
  evictions: number;
  bytes: number;
}

interface Entry {
  size: number;
  lastUsed: number;
  pins: number;
}

const NAME = /^[0-9A-Za-z][0-9A-Za-z._-]{0,127}$/;
const PART = ".part-";

/**
 * The conductor's image cache (Ironic's image_cache with `image_download_source = http`): each image is
 * downloaded once, its digest checked while it streams to disk, then served to every node deploying it.
 * Concurrent requests for one image share one download. Bounded by bytes: the least recently used images
 * are evicted first, never one a lease holds.
 */
export class ImageCache {
  private readonly entries = new Map<string, Entry>();
  private readonly running = new Map<string, Promise<Entry>>();
  private readonly stopping = new AbortController();
  readonly stats: CacheStats = { hits: 0, misses: 0, joined: 0, bytesDownloaded: 0, evictions: 0, bytes: 0 };

  constructor(private readonly options: { dir: string; maxBytes: number; now?: () => number }) {}

  get dir(): string {
    return this.options.dir;
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  /** Reads what a previous run left (whole files only: partial downloads are removed). */
  async open(): Promise<void> {
    await mkdir(this.options.dir, { recursive: true, mode: 0o700 });
    for (const name of await readdir(this.options.dir)) {
      const path = join(this.options.dir, name);
      if (name.startsWith(PART)) {
        await unlink(path).catch(() => undefined);
        continue;
      }
      if (!NAME.test(name)) continue;
      const info = await stat(path);
      if (!info.isFile()) continue;
      this.entries.set(name, { size: info.size, lastUsed: info.mtimeMs, pins: 0 });
    }
    this.recount();
  }

  /** Stops running downloads (their callers get an abort error). */
  close(): void {
    this.stopping.abort(new Error("the conductor is stopping"));
  }

  /** Whether `name` is cached now. */
  has(name: string): boolean {
    return this.entries.has(name);
  }

  /** Removes an image nobody leases now (one that is not for sharing, once its user is done with it). */
  async discard(name: string): Promise<void> {
    const entry = this.entries.get(name);
    if (!entry || entry.pins > 0) return;
    this.entries.delete(name);
    this.recount();
    await unlink(join(this.options.dir, name)).catch(() => undefined);
  }

  /** Marks a cached image used (a node fetched it), for the eviction order. */
  touch(name: string): void {
    const entry = this.entries.get(name);
    if (entry) entry.lastUsed = this.now();
  }

  /**
   * The image called `name`, downloaded with `fetch` unless cached or already coming, leased until release().
   * @throws Invalid when the download does not match `expected` or cannot fit beside leased images
   */
  async acquire(
    name: string,
    expected: Expected,
    fetch: (signal: AbortSignal) => Promise<Readable>,
  ): Promise<CacheLease> {
    if (!NAME.test(name)) throw new Invalid(`${name} is not a cacheable image name`);
    let entry = this.entries.get(name);
    let downloaded = false;
    if (entry) {
      this.stats.hits++;
    } else {
      let running = this.running.get(name);
      if (running) {
        this.stats.joined++;
      } else {
        this.stats.misses++;
        downloaded = true;
        running = this.download(name, expected, fetch).finally(() => this.running.delete(name));
        this.running.set(name, running);
      }
      entry = await running;
    }
    entry.pins++;
    entry.lastUsed = this.now();
    let released = false;
    const pinned = entry;
    return {
      name,
      size: entry.size,
      downloaded,
      release: () => {
        if (released) return;
        released = true;
        pinned.pins--;
        void this.evict(0);
      },
    };
  }

  private async download(
    name: string,
    expected: Expected,
    fetch: (signal: AbortSignal) => Promise<Readable>,
  ): Promise<Entry> {
    if (typeof expected.size === "number") {
      if (expected.size > this.options.maxBytes)
        throw new Invalid(
          `Image ${name} (${expected.size} bytes) is larger than the conductor's image cache (${this.options.maxBytes} bytes)`,
        );
      await this.evict(expected.size);
    }
    const part = join(this.options.dir, `${PART}${name}-${randomBytes(6).toString("hex")}`);
    const { checksum } = expected;
    const hash = checksum ? createHash(checksum.algo) : null;
    let bytes = 0;
    const limit = this.options.maxBytes;
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        bytes += chunk.length;
        if (bytes > limit) {
          done(new Invalid(`Image ${name} is larger than the conductor's image cache (${limit} bytes)`));
          return;
        }
        hash?.update(chunk);
        done(null, chunk);
      },
    });
    try {
      const source = await fetch(this.stopping.signal);
      await pipeline(source, counter, createWriteStream(part, { mode: 0o600 }), {
        signal: this.stopping.signal,
      });
      this.stats.bytesDownloaded += bytes;
      const got = hash?.digest("hex");
      if (checksum && got !== checksum.value.toLowerCase()) {
        throw new Invalid(
          `Image ${name} failed its checksum: expected ${checksum.algo} ${checksum.value}, got ${got}`,
        );
      }
      if (typeof expected.size === "number" && bytes !== expected.size) {
        throw new Invalid(`Image ${name} is ${bytes} bytes where its source says ${expected.size}`);
      }
      const path = join(this.options.dir, name);
      await rename(part, path);
      const now = this.now();
      await utimes(path, now / 1000, now / 1000).catch(() => undefined);
      const entry: Entry = { size: bytes, lastUsed: now, pins: 0 };
      this.entries.set(name, entry);
      this.recount();
      await this.evict(0, name);
      return entry;
    } catch (error) {
      await unlink(part).catch(() => undefined);
      throw error;
    }
  }

  /**
   * Removes unleased images, least recently used first, until `incoming` more bytes fit (never `keep`).
   * @throws Invalid when leased images leave no room for `incoming`
   */
  private async evict(incoming: number, keep?: string): Promise<void> {
    const victims = [...this.entries]
      .filter(([name, e]) => e.pins === 0 && name !== keep)
      .sort((a, b) => a[1].lastUsed - b[1].lastUsed);
    while (this.stats.bytes + incoming > this.options.maxBytes) {
      const victim = victims.shift();
      if (!victim) {
        if (incoming === 0) return; // over the bound only while leases hold images; their release evicts
        throw new Invalid(
          `The conductor's image cache (${this.options.maxBytes} bytes) cannot fit ${incoming} more bytes beside the images deploys are using`,
        );
      }
      this.entries.delete(victim[0]);
      this.stats.evictions++;
      this.recount();
      // a node still streaming it keeps reading: the open file outlives its name
      await unlink(join(this.options.dir, victim[0])).catch(() => undefined);
    }
  }

  private recount(): void {
    let total = 0;
    for (const e of this.entries.values()) total += e.size;
    this.stats.bytes = total;
  }
}
