import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ImageCache } from "../../conductor/images/image-cache.ts";

const KiB = 1024;
const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");
const bytes = (seed: number, size: number) => Buffer.alloc(size, seed);
const expectedOf = (data: Buffer) => ({
  checksum: { algo: "sha256" as const, value: sha256(data) },
  size: data.length,
});

describe("the conductor's image cache", () => {
  let dir: string;
  let clock = 1_000;
  const fetches: string[] = [];
  /** A source that counts its downloads and yields its bytes in small chunks, one tick apart. */
  const source = (name: string, data: Buffer) => () => {
    fetches.push(name);
    return Promise.resolve(
      Readable.from(
        (async function* () {
          for (let at = 0; at < data.length; at += 4 * KiB) {
            await new Promise((r) => setImmediate(r));
            yield data.subarray(at, at + 4 * KiB);
          }
        })(),
      ),
    );
  };
  const cache = (maxBytes: number) => new ImageCache({ dir, maxBytes, now: () => clock++ });

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-cache-"));
    fetches.length = 0;
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it("downloads once for concurrent callers, verifies the digest, and serves hits after", async () => {
    const c = cache(1024 * KiB);
    await c.open();
    const data = bytes(7, 64 * KiB);
    const leases = await Promise.all(
      Array.from({ length: 5 }, () => c.acquire("img-a", expectedOf(data), source("img-a", data))),
    );
    expect(fetches).toEqual(["img-a"]);
    expect(leases.filter((l) => l.downloaded)).toHaveLength(1);
    expect(await readFile(join(dir, "img-a"))).toEqual(data);
    const again = await c.acquire("img-a", expectedOf(data), source("img-a", data));
    expect(again.downloaded).toBe(false);
    expect(fetches).toHaveLength(1);
    expect(c.stats).toMatchObject({ misses: 1, joined: 4, hits: 1, bytesDownloaded: data.length });
  });

  it("a digest mismatch keeps nothing, names both digests, and the next caller downloads again", async () => {
    const c = cache(1024 * KiB);
    await c.open();
    const good = bytes(1, 16 * KiB);
    const bad = bytes(2, 16 * KiB);
    await expect(c.acquire("img-b", expectedOf(good), source("img-b", bad))).rejects.toThrow(
      `Image img-b failed its checksum: expected sha256 ${sha256(good)}, got ${sha256(bad)}`,
    );
    expect(await readdir(dir)).toEqual([]);
    expect(c.has("img-b")).toBe(false);
    await c.acquire("img-b", expectedOf(good), source("img-b", good));
    expect(fetches).toEqual(["img-b", "img-b"]);
  });

  it("evicts the least recently used beyond its bound, never an image a lease holds", async () => {
    const c = cache(100 * KiB);
    await c.open();
    const [a, b, d] = [bytes(1, 40 * KiB), bytes(2, 40 * KiB), bytes(3, 40 * KiB)];
    const leaseA = await c.acquire("a", expectedOf(a), source("a", a));
    (await c.acquire("b", expectedOf(b), source("b", b))).release();
    // "a" is older but leased (a deploy is using it): "b" goes
    const leaseD = await c.acquire("d", expectedOf(d), source("d", d));
    expect([c.has("a"), c.has("b"), c.has("d")]).toEqual([true, false, true]);
    expect(c.stats.bytes).toBe(80 * KiB);
    // every image leased: a new one that cannot fit is refused, with the reason
    const e = bytes(4, 40 * KiB);
    await expect(c.acquire("e", expectedOf(e), source("e", e))).rejects.toThrow(/cannot fit/);
    leaseA.release();
    leaseD.release();
    c.touch("a"); // a node fetched "a" just now: "d" is the least recently used
    await c.acquire("e", expectedOf(e), source("e", e));
    expect([c.has("a"), c.has("d"), c.has("e")]).toEqual([true, false, true]);
    expect((await readdir(dir)).sort()).toEqual(["a", "e"]);
  });

  it("refuses an image larger than the whole cache before downloading it", async () => {
    const c = cache(10 * KiB);
    await c.open();
    const big = bytes(5, 20 * KiB);
    await expect(c.acquire("big", expectedOf(big), source("big", big))).rejects.toThrow(/larger than/);
    expect(fetches).toEqual([]);
  });

  it("a restart keeps whole images and drops partial downloads", async () => {
    const data = bytes(9, 8 * KiB);
    await writeFile(join(dir, "kept"), data);
    await writeFile(join(dir, ".part-lost-0123"), "half");
    const c = cache(1024 * KiB);
    await c.open();
    expect(c.has("kept")).toBe(true);
    expect(await readdir(dir)).toEqual(["kept"]);
    expect((await c.acquire("kept", expectedOf(data), source("kept", data))).downloaded).toBe(false);
    expect(fetches).toEqual([]);
  });

  it("refuses names that are not plain file names", async () => {
    const c = cache(1024 * KiB);
    await c.open();
    for (const name of ["../x", "a/b", ".hidden", ""]) {
      await expect(
        c.acquire(name, expectedOf(Buffer.alloc(1)), source(name, Buffer.alloc(1))),
      ).rejects.toThrow(/not a cacheable/);
    }
  });
  it("keeps an image with no digest to check (virtual media) until discarded, never while leased", async () => {
    const c = cache(256 * KiB);
    await c.open();
    const data = bytes(7, 40 * KiB);
    const lease = await c.acquire("vmedia-cdrom-n1-abc", { checksum: null }, source("v", data));
    expect(await readFile(join(dir, lease.name))).toEqual(data);
    expect(c.stats.bytes).toBe(data.length);
    await c.discard(lease.name);
    expect(c.has(lease.name)).toBe(true);
    lease.release();
    await c.discard(lease.name);
    expect(c.has(lease.name)).toBe(false);
    expect(c.stats.bytes).toBe(0);
    expect(await readdir(dir)).toEqual([]);
  });

  it("bounds an image with no digest by the cache's size", async () => {
    const c = cache(16 * KiB);
    await c.open();
    await expect(
      c.acquire("vmedia-big", { checksum: null }, source("big", bytes(1, 32 * KiB))),
    ).rejects.toThrow("Image vmedia-big is larger than the conductor's image cache (16384 bytes)");
    expect(await readdir(dir)).toEqual([]);
  });
});
