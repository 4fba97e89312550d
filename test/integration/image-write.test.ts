import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, open, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { parseBlockMap } from "../../agent/image/bmap.ts";
import { ChecksumMismatchError, HttpStatusError, ImageError } from "../../agent/image/errors.ts";
import { writeImage } from "../../agent/image/write-image.ts";
import type { WriteImageOptions } from "../../agent/image/write-image.ts";
import { buildConfigDrive } from "../../conductor/images/configdrive.ts";
import type { ImageSpec, ImageProgress } from "../../shared/image.ts";
import { exec } from "../../shared/system/exec.ts";
import { startHttpImageServer } from "../helpers/http-image-server.ts";
import type { HttpImageServer } from "../helpers/http-image-server.ts";
import { readRange, sha256 } from "../helpers/disk.ts";
import { recordingLogger } from "../helpers/log.ts";
import { runOk } from "../helpers/run.ts";
import { selfSignedCert } from "../helpers/tls.ts";

const MiB = 1024 * 1024;
const IMAGE_SIZE = 32 * MiB;
const DISK_SIZE = 96 * MiB;
const FAST_FETCH = { stallTimeoutMs: 2_000, retryDelayMs: 20, connectTimeoutMs: 2_000 };

let dir: string;
let server: HttpImageServer;
let sourceSha256: string;

async function writeAt(path: string, offset: number, data: Buffer): Promise<void> {
  const handle = await open(path, "r+");
  await handle.write(data, 0, data.length, offset);
  await handle.close();
}

/** A 32 MiB whole-disk image: a GPT with one partition, random data in a few places, zeros elsewhere. */
async function makeSourceImage(path: string): Promise<void> {
  await writeFile(path, "");
  await truncate(path, IMAGE_SIZE);
  await runOk("sh", ["-c", `echo 'label: gpt\nsize=20MiB, name=rootfs' | sfdisk -q ${path}`]);
  await writeAt(path, 2 * MiB, randomBytes(5 * MiB));
  await writeAt(path, 12 * MiB + 4096, randomBytes(300 * 1024));
  await writeAt(path, 24 * MiB, randomBytes(MiB));
}

async function freshDisk(name = "disk"): Promise<string> {
  const path = join(dir, `${name}-${randomBytes(4).toString("hex")}.img`);
  await writeFile(path, "");
  await truncate(path, DISK_SIZE);
  // Stale bytes where zeros must end up: the writer must not leave them behind.
  await writeAt(path, 30 * MiB, Buffer.alloc(MiB, 0xaa));
  return path;
}

const spec = (file: string, extra: Partial<ImageSpec> = {}): ImageSpec => ({
  url: `${server.url}/${file}`,
  image_type: "whole-disk",
  ...extra,
});

const options = (target: string, extra: Partial<WriteImageOptions> = {}): WriteImageOptions => ({
  target,
  fetch: FAST_FETCH,
  ...extra,
});

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "anvil-image-"));
  const raw = join(dir, "disk.raw");
  await makeSourceImage(raw);
  sourceSha256 = sha256(await readFile(raw));
  await runOk("qemu-img", ["convert", "-f", "raw", "-O", "qcow2", raw, join(dir, "disk.qcow2")]);
  await runOk("qemu-img", [
    "convert",
    "-c",
    "-f",
    "raw",
    "-O",
    "qcow2",
    raw,
    join(dir, "disk-compressed.qcow2"),
  ]);
  await runOk("qemu-img", [
    "convert",
    "-f",
    "raw",
    "-O",
    "qcow2",
    "-o",
    "compat=0.10",
    raw,
    join(dir, "disk-v2.qcow2"),
  ]);
  await writeFile(
    join(dir, "disk.raw.gz"),
    await runOk("sh", ["-c", `gzip -c ${raw} | base64 -w0`]).then((b) => Buffer.from(b, "base64")),
  );
  await runOk("zstd", ["-q", "-f", "-o", join(dir, "disk.raw.zst"), raw]);
  await runOk("sh", ["-c", `xz -1 -T1 -c ${raw} > ${join(dir, "disk.raw.xz")}`]);
  // A qcow2 whose L1 table was reallocated after its data (by a resize): data arrives before its tables.
  const grown = join(dir, "grown.qcow2");
  await runOk("qemu-img", ["create", "-q", "-f", "qcow2", "-o", "cluster_size=4096", grown, "8M"]);
  await runOk("qemu-io", ["-c", "write -P 7 1M 3M", grown]);
  await runOk("qemu-img", ["resize", "-q", grown, "32M"]);
  await runOk("qemu-io", ["-c", "write -P 5 20M 1M", grown]);
  await runOk("qemu-img", ["convert", "-O", "raw", grown, join(dir, "grown.raw")]);

  // bmaptool's own block map of the sparse raw image; and a copy of the image with one mapped byte changed.
  await runOk("bmaptool", ["create", raw, "-o", join(dir, "disk.bmap")]);
  await runOk("cp", ["--sparse=always", raw, join(dir, "tampered.raw")]);
  await writeAt(join(dir, "tampered.raw"), 2 * MiB + 77, Buffer.from("X"));

  server = await startHttpImageServer();
  for (const file of [
    "disk.raw",
    "disk.bmap",
    "tampered.raw",
    "disk.qcow2",
    "disk-compressed.qcow2",
    "disk-v2.qcow2",
    "disk.raw.gz",
    "disk.raw.zst",
    "disk.raw.xz",
    "grown.qcow2",
  ]) {
    server.serve(`/${file}`, join(dir, file));
  }
}, 180_000);

afterAll(async () => {
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

beforeEach(() => {
  server.requests.length = 0;
});

describe("writeImage: formats", () => {
  it.each([
    ["raw", "disk.raw"],
    ["qcow2 v3", "disk.qcow2"],
    ["qcow2 with compressed clusters (qemu-img convert -c)", "disk-compressed.qcow2"],
    ["qcow2 v2 (compat=0.10)", "disk-v2.qcow2"],
    ["gzip", "disk.raw.gz"],
    ["zstd", "disk.raw.zst"],
    ["xz", "disk.raw.xz"],
  ])(
    "%s: the disk holds exactly the source image and the download's checksum is verified",
    async (_, file) => {
      const target = await freshDisk();
      const downloadSha = sha256(await readFile(join(dir, file)));
      const progress: ImageProgress[] = [];
      const result = await writeImage(
        { image: spec(file, { checksum: { algo: "sha256", value: downloadSha } }) },
        options(target, { onProgress: (p) => progress.push(p) }),
      );
      expect(sha256(await readRange(target, 0, IMAGE_SIZE))).toBe(sourceSha256);
      expect(result.image_bytes).toBe(IMAGE_SIZE);
      expect(result.checksum).toEqual({ algo: "sha256", value: downloadSha });
      // Zeros are skipped on the (freshly truncated) file, so far less than the image is written.
      expect(result.bytes_written).toBeLessThan(IMAGE_SIZE / 2);
      expect(progress.at(-1)?.bytes_done).toBe((await readFile(join(dir, file))).length);
    },
  );

  it("a qcow2 whose tables come after its data is held in memory and converted", async () => {
    const target = await freshDisk();
    await writeImage({ image: spec("grown.qcow2") }, options(target));
    const expected = await readFile(join(dir, "grown.raw"));
    expect(sha256(await readRange(target, 0, expected.length))).toBe(sha256(expected));
  });

  it("the same qcow2 fails clearly when held data would pass the bound", async () => {
    const target = await freshDisk();
    const failure = writeImage(
      { image: spec("grown.qcow2") },
      options(target, { qcow2MaxBufferedBytes: 256 * 1024 }),
    );
    await expect(failure).rejects.toMatchObject({ code: "qcow2_out_of_order" });
  });
});

describe("writeImage: checksums", () => {
  it("a checksum mismatch rejects with ChecksumMismatchError (no success is reported)", async () => {
    const target = await freshDisk();
    const wrong = sha256(Buffer.from("not the image"));
    const failure = writeImage(
      { image: spec("disk.raw", { checksum: { algo: "sha256", value: wrong } }) },
      options(target),
    );
    await expect(failure).rejects.toBeInstanceOf(ChecksumMismatchError);
  });

  it("fetches the expected digest from a checksum file URL (md5 inferred from its length)", async () => {
    const md5 = createHash("md5")
      .update(await readFile(join(dir, "disk.raw.zst")))
      .digest("hex");
    const sums = join(dir, "MD5SUMS");
    await writeFile(sums, `${"0".repeat(32)}  other.img\n${md5}  disk.raw.zst\n`);
    server.serve("/MD5SUMS", sums);
    const result = await writeImage(
      { image: spec("disk.raw.zst", { checksum: { url: `${server.url}/MD5SUMS` } }) },
      options(await freshDisk()),
    );
    expect(result.checksum).toEqual({ algo: "md5", value: md5 });
  });
});

describe("writeImage: an image hashed on a worker thread (parallelHashBytes 1 MiB)", () => {
  const large = randomBytes(24 * MiB + 123);
  const onWorker = { parallelHashBytes: MiB };
  const digest = sha256(large);
  const largeTarget = async (): Promise<string> => {
    const target = join(dir, `large-${randomBytes(4).toString("hex")}.img`);
    await writeFile(target, "");
    return target;
  };
  beforeAll(async () => {
    await writeFile(join(dir, "large.raw"), large);
    server.serve("/large-drop.raw", join(dir, "large.raw"), { dropAfterBytes: 10 * MiB + 5 });
    server.serve("/large.raw", join(dir, "large.raw"));
  });

  it("a 24 MiB raw image, dropped once, is written and verified; a wrong digest still fails", async () => {
    const target = await largeTarget();
    const result = await writeImage(
      { image: spec("large-drop.raw", { checksum: { algo: "sha256", value: digest } }) },
      options(target, onWorker),
    );
    expect(result.checksum).toEqual({ algo: "sha256", value: digest });
    expect((await readFile(target)).subarray(0, large.length).equals(large)).toBe(true);
    const wrong = writeImage(
      { image: spec("large.raw", { checksum: { algo: "sha256", value: sha256(Buffer.from("no")) } }) },
      options(await largeTarget(), onWorker),
    );
    await expect(wrong).rejects.toBeInstanceOf(ChecksumMismatchError);
  });

  it("its resume checkpoints carry the digests of the disk's first bytes, asked of the worker", async () => {
    const reports: ImageProgress[] = [];
    await writeImage(
      {
        image: spec("large.raw", { checksum: { algo: "sha256", value: digest } }),
        checkpoint_bytes: 4 * MiB,
      },
      options(await largeTarget(), { ...onWorker, onProgress: (progress) => reports.push(progress) }),
    );
    const checkpoints = reports.flatMap((r) => (r.checkpoint ? [r.checkpoint] : []));
    expect(checkpoints.length).toBeGreaterThanOrEqual(4);
    for (const checkpoint of checkpoints)
      expect(checkpoint.digest).toBe(sha256(large.subarray(0, checkpoint.bytes)));
  });
});

describe("writeImage: HTTP faults", () => {
  it("resumes a twice-dropped download with Range requests starting where each drop stopped", async () => {
    server.serve("/drop.raw", join(dir, "disk.raw"), { dropAfterBytes: 3 * MiB, dropTimes: 2 });
    const target = await freshDisk();
    const result = await writeImage(
      { image: spec("drop.raw", { checksum: { algo: "sha256", value: sourceSha256 } }) },
      options(target),
    );
    expect(result.checksum?.value).toBe(sourceSha256);
    expect(sha256(await readRange(target, 0, IMAGE_SIZE))).toBe(sourceSha256);
    const ranges = server.requests.filter((r) => r.path === "/drop.raw").map((r) => [r.range, r.status]);
    expect(ranges).toEqual([
      [undefined, 200],
      [`bytes=${3 * MiB}-`, 206],
      [`bytes=${6 * MiB}-`, 206],
    ]);
  });

  it("fails rather than corrupt when the server ignores Range on a resume", async () => {
    server.serve("/norange.raw", join(dir, "disk.raw"), { dropAfterBytes: MiB, ignoreRange: true });
    const failure = writeImage({ image: spec("norange.raw") }, options(await freshDisk()));
    await expect(failure).rejects.toMatchObject({ code: "http_range" });
  });

  it.each([403, 404])("HTTP %i fails at once with the status in the message, no retries", async (status) => {
    server.serve("/denied.raw", join(dir, "disk.raw"), { status });
    const failure = writeImage({ image: spec("denied.raw") }, options(await freshDisk()));
    await expect(failure).rejects.toBeInstanceOf(HttpStatusError);
    await expect(failure).rejects.toThrow(new RegExp(`HTTP ${status}`));
    expect(server.requests.filter((r) => r.path === "/denied.raw")).toHaveLength(1);
  });

  it("retries 503 with backoff and then succeeds", async () => {
    server.serve("/busy.raw", join(dir, "disk.raw"), { unavailableTimes: 2 });
    const result = await writeImage({ image: spec("busy.raw") }, options(await freshDisk()));
    expect(result.checksum?.value).toBe(sourceSha256);
    expect(server.requests.filter((r) => r.path === "/busy.raw").map((r) => r.status)).toEqual([
      503, 503, 200,
    ]);
  });

  it("a stalled server fails with http_stall once the stall timeout passes", async () => {
    server.serve("/stall.raw", join(dir, "disk.raw"), { stallAfterBytes: MiB });
    const failure = writeImage(
      { image: spec("stall.raw") },
      options(await freshDisk(), { fetch: { ...FAST_FETCH, stallTimeoutMs: 500 } }),
    );
    await expect(failure).rejects.toMatchObject({ code: "http_stall" });
  });

  it("an aborted signal stops the write", async () => {
    server.serve("/slow.raw", join(dir, "disk.raw"), { stallAfterBytes: MiB });
    const controller = new AbortController();
    const failure = writeImage(
      { image: spec("slow.raw") },
      options(await freshDisk(), { signal: controller.signal }),
    );
    setTimeout(() => controller.abort(new Error("cancelled by test")), 200);
    await expect(failure).rejects.toThrow(/cancelled by test/);
  });

  it("a temp URL's signature never appears in error messages", async () => {
    const failure = writeImage(
      { image: spec("missing.raw?temp_url_sig=SECRETSIG&temp_url_expires=1") },
      options(await freshDisk()),
    );
    await expect(failure).rejects.toBeInstanceOf(ImageError);
    await expect(failure).rejects.not.toThrow(/SECRETSIG/);
  });
});

describe("writeImage to a block device", () => {
  it("a loop device gets the qcow2's bytes, holes written as zeros, stale metadata erased", async (context) => {
    const backing = await freshDisk("loop");
    // A stale GPT backup header in the disk's last sector, left by a previous deployment.
    await writeAt(backing, DISK_SIZE - 512, Buffer.from("EFI PART"));
    const attach = await exec("losetup", ["--find", "--show", backing]);
    if (attach.code !== 0) return context.skip(`no loop devices here: ${attach.stderr.trim()}`);
    const loop = attach.stdout.trim();
    try {
      const result = await writeImage({ image: spec("disk.qcow2") }, options(loop));
      expect(result.image_bytes).toBe(IMAGE_SIZE);
      // Stale 0xaa bytes sat at 30 MiB, inside the image's zeros: the loop device is not assumed to read zeros.
      expect(sha256(await readRange(backing, 0, IMAGE_SIZE))).toBe(sourceSha256);
      expect((await readRange(backing, DISK_SIZE - 512, 8)).toString("latin1")).not.toBe("EFI PART");
    } finally {
      await exec("losetup", ["--detach", loop]);
    }
  });
});

describe("writeImage with a block map", () => {
  const mapped = (file: string, extra: Partial<ImageSpec> = {}): ImageSpec =>
    spec(file, { block_map: `${server.url}/disk.bmap`, ...extra });
  const requestsFor = (path: string): { range: string | undefined; status: number }[] =>
    server.requests.filter((r) => r.path === path);
  const rangeStart = (range: string | undefined): number => Number(/^bytes=(\d+)-/.exec(range ?? "")?.[1]);

  it("downloads only the mapped ranges, zeroes the holes, and verifies the whole image's sha256", async () => {
    const map = parseBlockMap(await readFile(join(dir, "disk.bmap"), "utf8"));
    expect(map.mappedBytes).toBeLessThan(IMAGE_SIZE / 3);
    const target = await freshDisk();
    const result = await writeImage(
      { image: mapped("disk.raw", { checksum: { algo: "sha256", value: sourceSha256 } }) },
      options(target),
    );
    expect(result.checksum?.value).toBe(sourceSha256);
    expect(sha256(await readRange(target, 0, IMAGE_SIZE))).toBe(sourceSha256);
    const requests = requestsFor("/disk.raw");
    // A probe of the first bytes, then exactly one Range request per mapped range, never the whole object.
    expect(requests.map((r) => r.range)).toEqual([
      "bytes=0-7",
      ...map.ranges.map((r) => `bytes=${r.start}-${r.end - 1}`),
    ]);
    expect(requests.every((r) => r.status === 206)).toBe(true);
  });

  it("a wrong whole-image checksum still fails (the holes' zeros are hashed too)", async () => {
    const wrong = "0".repeat(64);
    const failure = writeImage(
      { image: mapped("disk.raw", { checksum: { algo: "sha256", value: wrong } }) },
      options(await freshDisk()),
    );
    await expect(failure).rejects.toBeInstanceOf(ChecksumMismatchError);
  });

  it("bytes that differ from the map's range digest fail with checksum_mismatch naming the range", async () => {
    const failure = writeImage({ image: mapped("tampered.raw") }, options(await freshDisk()));
    await expect(failure).rejects.toMatchObject({ code: "checksum_mismatch" });
    await expect(failure).rejects.toThrow(/bytes 2097152-\d+ do not match the block map's sha256/);
  });

  it("a range cut off mid-way is resumed from where it stopped, not from the range's start", async () => {
    // Every answer is cut after 1 MiB (smaller ones just lose their keep-alive connection).
    server.serve("/drop-mapped.raw", join(dir, "disk.raw"), { dropAfterBytes: MiB, dropTimes: 10 });
    const map = parseBlockMap(await readFile(join(dir, "disk.bmap"), "utf8"));
    const target = await freshDisk();
    await writeImage({ image: mapped("drop-mapped.raw") }, options(target));
    expect(sha256(await readRange(target, 0, IMAGE_SIZE))).toBe(sourceSha256);
    const starts = requestsFor("/drop-mapped.raw").map((r) => rangeStart(r.range));
    const inside = starts.filter((at) => map.ranges.some((r) => at > r.start && at < r.end));
    expect(inside).toContain(2 * MiB + MiB); // the 5 MiB range at 2 MiB, resumed after its first MiB
  });

  it("a map that does not fit the object (here: a zstd file) is ignored and the image streamed whole", async () => {
    const target = await freshDisk();
    const logged: string[] = [];
    const logger = recordingLogger(logged);
    const result = await writeImage({ image: mapped("disk.raw.zst") }, options(target, { logger }));
    expect(sha256(await readRange(target, 0, IMAGE_SIZE))).toBe(sourceSha256);
    expect(result.checksum?.algo).toBe("sha256");
    expect(requestsFor("/disk.raw.zst").some((r) => r.range === undefined && r.status === 200)).toBe(true);
    expect(logged.some((line) => line.includes("block map does not fit the image"))).toBe(true);
  });

  it("a block map on a loop device: holes are written as zeros over stale bytes", async (context) => {
    const backing = await freshDisk("loop-mapped");
    const attach = await exec("losetup", ["--find", "--show", backing]);
    if (attach.code !== 0) return context.skip(`no loop devices here: ${attach.stderr.trim()}`);
    const loop = attach.stdout.trim();
    try {
      await writeImage({ image: mapped("disk.raw") }, options(loop));
      expect(sha256(await readRange(backing, 0, IMAGE_SIZE))).toBe(sourceSha256);
    } finally {
      await exec("losetup", ["--detach", loop]);
    }
  });
});

describe("writeImage over HTTPS", () => {
  it("verifies the server against the given CA and writes the image; an untrusted server is refused", async () => {
    const { key, cert: ca } = await selfSignedCert(dir);
    const tls = await startHttpImageServer({ tls: { key, cert: ca } });
    try {
      tls.serve("/disk.raw.zst", join(dir, "disk.raw.zst"));
      const url = `${tls.url}/disk.raw.zst`;
      const target = await freshDisk();
      await writeImage(
        { image: { url, image_type: "whole-disk" } },
        options(target, { fetch: { ...FAST_FETCH, ca } }),
      );
      expect(sha256(await readRange(target, 0, IMAGE_SIZE))).toBe(sourceSha256);
      const untrusted = writeImage({ image: { url, image_type: "whole-disk" } }, options(await freshDisk()));
      await expect(untrusted).rejects.toThrow(/self[- ]signed|certificate/i);
    } finally {
      await tls.close();
    }
  });

  it("takes the CA from the request itself (instance_info.image_ca_cert or the conductor's tls.imageCa)", async () => {
    const { key, cert: ca } = await selfSignedCert(dir);
    const tls = await startHttpImageServer({ tls: { key, cert: ca } });
    try {
      tls.serve("/disk.raw.zst", join(dir, "disk.raw.zst"));
      const target = await freshDisk();
      await writeImage(
        { image: { url: `${tls.url}/disk.raw.zst`, image_type: "whole-disk", ca } },
        options(target, { fetch: FAST_FETCH }),
      );
      expect(sha256(await readRange(target, 0, IMAGE_SIZE))).toBe(sourceSha256);
    } finally {
      await tls.close();
    }
  });
});

async function partitionNames(disk: string): Promise<string[]> {
  const dump = JSON.parse(await runOk("sfdisk", ["--json", disk])) as {
    partitiontable: { partitions: { name?: string }[] };
  };
  return dump.partitiontable.partitions.map((p) => p.name ?? "");
}

async function isoFile(disk: string, start: number, name: string): Promise<Record<string, unknown>> {
  const iso = join(dir, `cd-${randomBytes(4).toString("hex")}.iso`);
  await writeFile(iso, await readRange(disk, start, 64 * MiB));
  const text = await runOk("isoinfo", ["-R", "-i", iso, "-x", `/openstack/latest/${name}`]);
  return JSON.parse(text) as Record<string, unknown>;
}

describe("writeImage: partition images and config drives", () => {
  const content = {
    meta_data: {
      uuid: "7d2c1f0e-0000-4000-8000-000000000001",
      hostname: "node-1",
      public_keys: { k: "ssh-ed25519 AAA" },
    },
    user_data: "#cloud-config\nhostname: node-1\n",
    network_data: { links: [], networks: [], services: [] },
  };

  it("partition image: GPT with root, swap and config drive; the image in root; the config drive readable", async () => {
    const rootImage = randomBytes(6 * MiB);
    await writeFile(join(dir, "root.img"), rootImage);
    server.serve("/root.img", join(dir, "root.img"));
    const target = await freshDisk();
    const result = await writeImage(
      {
        image: spec("root.img", {
          image_type: "partition",
          partition: { root_mb: 16, swap_mb: 8, configdrive: true },
        }),
        configdrive: await buildConfigDrive(content),
      },
      options(target),
    );
    const parts = result.partitions ?? {};
    expect(Object.keys(parts).sort()).toEqual(["configdrive", "root", "swap"]);
    expect(parts.root?.size_bytes).toBe(16 * MiB);
    const root = await readRange(target, parts.root?.start_bytes ?? -1, rootImage.length);
    expect(sha256(root)).toBe(sha256(rootImage));
    expect(await partitionNames(target)).toEqual(["root", "swap", "config-2"]);
    expect(await isoFile(target, parts.configdrive?.start_bytes ?? -1, "meta_data.json")).toEqual(
      content.meta_data,
    );
    expect(await isoFile(target, parts.configdrive?.start_bytes ?? -1, "network_data.json")).toEqual(
      content.network_data,
    );
  });

  it("whole-disk GPT image: a config-2 partition is added at the end of the disk", async () => {
    const target = await freshDisk();
    const result = await writeImage(
      { image: spec("disk.qcow2"), configdrive: await buildConfigDrive(content) },
      options(target),
    );
    const cd = result.partitions?.configdrive;
    expect(cd?.number).toBe(2);
    expect((cd?.start_bytes ?? 0) + (cd?.size_bytes ?? 0)).toBeGreaterThan(DISK_SIZE - 2 * MiB);
    expect(await partitionNames(target)).toEqual(["rootfs", "config-2"]);
    // The backup GPT moved to the real end of the disk: the table verifies clean.
    expect(await runOk("sgdisk", ["--verify", target])).toContain("No problems found");
    expect(await isoFile(target, cd?.start_bytes ?? -1, "meta_data.json")).toEqual(content.meta_data);
    // The image's partition kept its bytes.
    expect(sha256(await readRange(target, 2 * MiB, 5 * MiB))).toBe(
      sha256(await readRange(join(dir, "disk.raw"), 2 * MiB, 5 * MiB)),
    );
  });

  it("a config drive given as a URL is fetched and written", async () => {
    const encoded = join(dir, "configdrive.b64");
    await writeFile(encoded, await buildConfigDrive(content));
    server.serve("/configdrive.b64", encoded);
    const target = await freshDisk();
    const result = await writeImage(
      { image: spec("disk.raw.gz"), configdrive: `${server.url}/configdrive.b64` },
      options(target),
    );
    expect(
      await isoFile(target, result.partitions?.configdrive?.start_bytes ?? -1, "meta_data.json"),
    ).toEqual(content.meta_data);
  });

  it("whole-disk MBR image: a primary partition at the end of the disk holds the config drive", async () => {
    const mbr = join(dir, "mbr.raw");
    await writeFile(mbr, "");
    await truncate(mbr, 16 * MiB);
    await runOk("sh", ["-c", `echo 'label: dos\nsize=8MiB, type=83' | sfdisk -q ${mbr}`]);
    await writeAt(mbr, 2 * MiB, randomBytes(MiB));
    server.serve("/mbr.raw", mbr);
    const target = await freshDisk();
    const result = await writeImage(
      { image: spec("mbr.raw"), configdrive: await buildConfigDrive(content) },
      options(target),
    );
    const cd = result.partitions?.configdrive;
    expect(cd?.number).toBe(2);
    expect((cd?.start_bytes ?? 0) + (cd?.size_bytes ?? 0)).toBeGreaterThan(DISK_SIZE - 2 * MiB);
    const dump = JSON.parse(await runOk("sfdisk", ["--json", target])) as {
      partitiontable: { label: string; partitions: { type: string }[] };
    };
    expect(dump.partitiontable.label).toBe("dos");
    expect(dump.partitiontable.partitions.map((p) => p.type)).toEqual(["83", "83"]);
    expect(await isoFile(target, cd?.start_bytes ?? -1, "meta_data.json")).toEqual(content.meta_data);
  });

  it("a config drive that is not an ISO is refused before the disk is touched", async () => {
    const target = await freshDisk();
    const failure = writeImage(
      { image: spec("disk.raw"), configdrive: Buffer.from("nope").toString("base64") },
      options(target),
    );
    await expect(failure).rejects.toMatchObject({ code: "configdrive" });
    expect(server.requests).toHaveLength(0);
  });
});
