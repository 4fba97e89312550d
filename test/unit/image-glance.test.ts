import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultConfig } from "../../conductor/config.ts";
import { Invalid } from "../../conductor/errors.ts";
import {
  checkImageAccess,
  glanceChecksum,
  glanceImageId,
  type GlanceImage,
  type GlanceReader,
} from "../../conductor/images/glance.ts";
import { GlanceImageSources, noGlance, swiftObjectOf } from "../../conductor/images/glance-source.ts";
import { ImageCache } from "../../conductor/images/image-cache.ts";
import { ImageLinks } from "../../conductor/images/signed-links.ts";
import { createUrlSigner } from "../../conductor/images/url-signer.ts";

const ID = "5b1f0a4e-7c55-4e36-9d9c-0f6c1d2a9e11";
const image = (fields: Partial<GlanceImage> = {}): GlanceImage => ({
  id: ID,
  status: "active",
  visibility: "private",
  owner: "p1",
  disk_format: "qcow2",
  container_format: "bare",
  size: 4,
  os_hash_algo: "sha512",
  os_hash_value: "ab".repeat(64),
  checksum: "cd".repeat(16),
  ...fields,
});

describe("Glance image references", () => {
  it("takes a bare UUID or glance://…/<uuid>, and nothing else", () => {
    expect(glanceImageId(ID)).toBe(ID);
    expect(glanceImageId(`glance://${ID}`)).toBe(ID);
    expect(glanceImageId(`glance://region/${ID}`)).toBe(ID);
    expect(glanceImageId("http://host/disk.raw")).toBeNull();
    expect(glanceImageId("file:///srv/images/x")).toBeNull();
    expect(() => glanceImageId("glance://not-a-uuid")).toThrow(`Invalid image href glance://not-a-uuid.`);
  });

  it("never throws anything but Invalid, whatever the string (generated input)", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.string().map((s) => `glance://${s}`),
          fc.uuid(),
        ),
        (source) => {
          try {
            const id = glanceImageId(source);
            if (id !== null) expect(source.endsWith(id)).toBe(true);
          } catch (error) {
            expect(error).toBeInstanceOf(Invalid);
          }
        },
      ),
    );
  });

  it("prefers os_hash_value to the md5 checksum, and only algorithms the agent knows", () => {
    expect(glanceChecksum(image())).toEqual({ algo: "sha512", value: "ab".repeat(64) });
    expect(glanceChecksum(image({ os_hash_algo: "sha3_256" }))).toEqual({
      algo: "md5",
      value: "cd".repeat(16),
    });
    expect(glanceChecksum(image({ os_hash_algo: null, os_hash_value: null, checksum: null }))).toBeNull();
  });
});

describe("who may deploy a Glance image (Ironic's rule)", () => {
  const members = (list: string[]) => ({ members: () => Promise.resolve(list) });
  const node = (owner: string | null, lessee: string | null = null) => ({ owner, lessee });

  it("public and community images: anyone", async () => {
    for (const visibility of ["public", "community"] as const)
      await expect(checkImageAccess(image({ visibility }), node(null), members([]))).resolves.toBeUndefined();
  });

  it("a private image: its owner as the node's owner or lessee, or the conductor's project; else refused", async () => {
    await expect(checkImageAccess(image(), node("p1"), members([]))).resolves.toBeUndefined();
    await expect(checkImageAccess(image(), node("p9", "p1"), members([]))).resolves.toBeUndefined();
    await expect(
      checkImageAccess(image({ owner: "svc" }), node("p2"), { ...members([]), serviceProject: "svc" }),
    ).resolves.toBeUndefined();
    await expect(checkImageAccess(image(), node("p2"), members([]))).rejects.toThrow(
      `Not authorized for image ${ID}.`,
    );
    await expect(checkImageAccess(image(), node(null), members([]))).rejects.toThrow(/Not authorized/);
  });

  it("a shared image: an accepted member among the node's projects", async () => {
    const shared = image({ visibility: "shared" });
    await expect(checkImageAccess(shared, node("p2"), members(["p2"]))).resolves.toBeUndefined();
    await expect(checkImageAccess(shared, node("p3"), members(["p2"]))).rejects.toThrow(/Not authorized/);
  });

  it("an image that is not active is unacceptable", async () => {
    await expect(checkImageAccess(image({ status: "queued" }), node("p1"), members([]))).rejects.toThrow(
      /required to be in an active state/,
    );
  });
});

describe("where the agent fetches a Glance image from", () => {
  let dir: string;
  const links = new ImageLinks();
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-glance-unit-"));
    await links.load({ sharedSecret: (_n, c) => Promise.resolve(c) });
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const reader = (record: GlanceImage): GlanceReader & { downloads: number } => {
    const fake = {
      downloads: 0,
      image: () => Promise.resolve(record),
      members: () => Promise.resolve([]),
      download: () => {
        fake.downloads++;
        return Promise.resolve(Readable.from([Buffer.from("data")]));
      },
    };
    return fake;
  };

  it("Glance on Swift: a Swift temp URL, no download by the conductor", async () => {
    const config = defaultConfig({
      images: {
        swift: { endpoint: "https://swift.example.com", account: "AUTH_glance", tempUrlKey: "k" },
      },
    });
    const record = image({ direct_url: `swift+config://ref1/glance/${ID}` });
    expect(swiftObjectOf(record)?.toString()).toBe(`swift://glance/${ID}`);
    const client = reader(record);
    const sources = new GlanceImageSources({
      client,
      cache: new ImageCache({ dir, maxBytes: 1024 }),
      links,
      swift: createUrlSigner(config),
      publicUrl: () => "http://192.0.2.1:6385",
      linkLifetimeS: 600,
    });
    const resolved = await sources.resolve({
      instance_info: { image_source: ID },
      owner: "p1",
      lessee: null,
    });
    const url = new URL(String(resolved.instanceInfo.image_source));
    expect(url.origin + url.pathname).toBe(`https://swift.example.com/v1/AUTH_glance/glance/${ID}`);
    expect(url.searchParams.get("temp_url_sig")).toBeTruthy();
    expect(resolved.instanceInfo).toMatchObject({
      image_disk_format: "qcow2",
      image_os_hash_algo: "sha512",
      image_size: 4,
    });
    expect(client.downloads).toBe(0);
  });

  it("refuses a format the agent cannot write, and Glance sources on a conductor without Glance", async () => {
    const sources = new GlanceImageSources({
      client: reader(image({ disk_format: "vmdk" })),
      cache: new ImageCache({ dir, maxBytes: 1024 }),
      links,
      publicUrl: () => "http://192.0.2.1:6385",
      linkLifetimeS: 600,
    });
    const node = { instance_info: { image_source: ID }, owner: "p1", lessee: null };
    await expect(sources.check(node)).rejects.toThrow(/disk_format vmdk/);
    await expect(noGlance.check(node)).rejects.toThrow(/no glance settings/);
    const http = { instance_info: { image_source: "http://h/x.raw" }, owner: null, lessee: null };
    expect((await noGlance.resolve(http)).instanceInfo).toBe(http.instance_info);
  });
});
