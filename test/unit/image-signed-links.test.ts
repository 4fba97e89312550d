import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import Fastify from "fastify";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { localImagesPlugin } from "../../conductor/images/local-images-plugin.ts";
import {
  ImageLinks,
  LINK_PARAMS,
  parseLinkQuery,
  type LinkKeySource,
} from "../../conductor/images/signed-links.ts";

/** A key source standing for the database: the first candidate wins, as the table does. */
function memoryKeys(): LinkKeySource {
  const stored = new Map<string, string>();
  return {
    sharedSecret(name, candidate) {
      if (!stored.has(name)) stored.set(name, candidate);
      return Promise.resolve(stored.get(name)!);
    },
  };
}

const T0 = Date.UTC(2026, 10, 26, 12, 0, 0);

async function loaded(keys: LinkKeySource, now: () => number = () => T0): Promise<ImageLinks> {
  const links = new ImageLinks(now);
  await links.load(keys);
  return links;
}

describe("signed image links", () => {
  it("verifies its own link until it expires, then says expired", async () => {
    let now = T0;
    const links = await loaded(memoryKeys(), () => now);
    const url = links.sign("/images/os/disk.qcow2", 600);
    expect(links.check(url)).toBe("ok");
    now = T0 + 599_000;
    expect(links.check(url)).toBe("ok");
    now = T0 + 600_000;
    expect(links.check(url)).toBe("expired");
  });

  it("refuses an unsigned path, a tampered path and a tampered expiry", async () => {
    const links = await loaded(memoryKeys());
    const url = links.sign("/images/a.raw", 600);
    expect(links.check("/images/a.raw")).toBe("invalid");
    expect(links.check(url.replace("/images/a.raw", "/images/b.raw"))).toBe("invalid");
    const expires = new URL(url, "http://x").searchParams.get(LINK_PARAMS.expires)!;
    expect(links.check(url.replace(`=${expires}`, `=${Number(expires) + 1}`))).toBe("invalid");
    expect(links.check(`${url}&x=1`)).toBe("invalid");
  });

  it("another conductor with the same database verifies the link; another cluster does not", async () => {
    const db = memoryKeys();
    const one = await loaded(db);
    const two = await loaded(db);
    const url = one.sign("/image-cache/x", 60);
    expect(two.check(url)).toBe("ok");
    expect((await loaded(memoryKeys())).check(url)).toBe("invalid");
  });

  it("refuses everything before its key is loaded", () => {
    const links = new ImageLinks(() => T0);
    expect(links.check(`/images/a?${LINK_PARAMS.expires}=1&${LINK_PARAMS.signature}=${"A".repeat(43)}`)).toBe(
      "invalid",
    );
    expect(() => links.sign("/images/a", 1)).toThrow(/started/);
  });

  it("the query parser never throws and accepts only one well-formed pair (generated input)", async () => {
    const links = await loaded(memoryKeys());
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (query) => {
        const parsed = parseLinkQuery(query);
        if (parsed === null) return;
        expect(parsed.signature.length).toBe(32);
        expect(Number.isSafeInteger(parsed.expires)).toBe(true);
      }),
    );
    // any change to a valid link (one character replaced) no longer verifies as that link
    const url = links.sign("/images/dir/disk.raw", 3600);
    fc.assert(
      fc.property(fc.nat({ max: url.length - 1 }), fc.constantFrom(..."abcXYZ019-_/?&=%."), (at, ch) => {
        const changed = url.slice(0, at) + ch + url.slice(at + 1);
        fc.pre(changed !== url);
        expect(links.check(changed)).not.toBe("ok");
      }),
      { numRuns: 2000 },
    );
  });
});

describe("the image routes behind signed links", () => {
  let base: string;
  let app: FastifyInstance;
  let links: ImageLinks;
  let now = T0;
  beforeAll(async () => {
    base = await mkdtemp(join(tmpdir(), "anvil-links-"));
    await mkdir(join(base, "root", "tenant"), { recursive: true });
    await writeFile(join(base, "root", "tenant", "disk.raw"), "0123456789");
    await writeFile(join(base, "root", "tenant", "other.raw"), "another tenant's");
    links = await loaded(memoryKeys(), () => now);
    app = Fastify();
    await mkdir(join(base, "root", "ramdisk"));
    await writeFile(join(base, "root", "ramdisk", "anvil.kernel"), "kernel");
    await app.register(localImagesPlugin, {
      prefix: "/images",
      root: join(base, "root"),
      links,
      publicDir: "ramdisk",
    });
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await rm(base, { recursive: true, force: true });
  });

  it("serves a signed link, with ranges", async () => {
    const url = links.sign("/images/tenant/disk.raw", 60);
    const whole = await app.inject({ method: "GET", url });
    expect(whole.statusCode).toBe(200);
    expect(whole.body).toBe("0123456789");
    const part = await app.inject({ method: "GET", url, headers: { range: "bytes=2-4" } });
    expect(part.statusCode).toBe(206);
    expect(part.body).toBe("234");
  });

  it("a plain GET is 403, the same for a file that exists and one that does not", async () => {
    const there = await app.inject({ method: "GET", url: "/images/tenant/disk.raw" });
    const absent = await app.inject({ method: "GET", url: "/images/tenant/none.raw" });
    expect(there.statusCode).toBe(403);
    expect(absent.statusCode).toBe(403);
    expect(there.body).toBe(absent.body);
  });

  it("a link for one file opens no other, and an expired link is 403", async () => {
    const url = links.sign("/images/tenant/disk.raw", 60);
    const other = url.replace("disk.raw", "other.raw");
    expect((await app.inject({ method: "GET", url: other })).statusCode).toBe(403);
    now = T0 + 61_000;
    const expired = await app.inject({ method: "GET", url });
    now = T0;
    expect(expired.statusCode).toBe(403);
    expect(expired.body).toMatch(/expired/);
  });

  it("the public directory (deploy kernel and ramdisk) needs no link; nothing else does without one", async () => {
    const kernel = await app.inject({ method: "GET", url: "/images/ramdisk/anvil.kernel" });
    expect(kernel.statusCode).toBe(200);
    expect(kernel.body).toBe("kernel");
    expect(
      (await app.inject({ method: "GET", url: "/images/ramdisk/../tenant/disk.raw" })).statusCode,
    ).not.toBe(200);
    expect((await app.inject({ method: "GET", url: "/images/ramdisk" })).statusCode).toBe(403);
  });

  it("a signed link to a file that is gone is 404", async () => {
    const response = await app.inject({ method: "GET", url: links.sign("/images/tenant/gone.raw", 60) });
    expect(response.statusCode).toBe(404);
  });
});
