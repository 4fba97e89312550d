import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { decompress, detectCompression } from "../../agent/image/decompress.ts";
import { exec } from "../../shared/system/exec.ts";

async function collect(source: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of source) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts);
}

async function* pieces(data: Buffer, size = 7_777): AsyncGenerator<Buffer> {
  for (let at = 0; at < data.length; at += size) yield data.subarray(at, at + size);
}

async function compressWith(tool: "zstd" | "xz", data: Buffer): Promise<Buffer> {
  const result = await exec("sh", ["-c", `${tool} -c | base64 -w0`], { input: data, timeoutMs: 60_000 });
  return Buffer.from(result.stdout, "base64");
}

const sample = Buffer.concat([
  Buffer.from("anvil image ".repeat(5000)),
  Buffer.alloc(300_000),
  Buffer.from([1, 2, 3]),
]);

describe("detectCompression", () => {
  it("recognises gzip, zstd and xz by magic; anything else is none", async () => {
    expect(detectCompression(gzipSync(sample))).toBe("gzip");
    expect(detectCompression(await compressWith("zstd", sample))).toBe("zstd");
    expect(detectCompression(await compressWith("xz", sample))).toBe("xz");
    expect(detectCompression(Buffer.from("QFI\xfb"))).toBe("none");
  });
});

describe("decompress", () => {
  it.each(["gzip", "zstd", "xz"] as const)("%s round-trips fed in odd-sized pieces", async (kind) => {
    const packed = kind === "gzip" ? gzipSync(sample) : await compressWith(kind, sample);
    expect((await collect(decompress(pieces(packed), kind))).equals(sample)).toBe(true);
  });

  it("zstd: 1 GiB of zeros comes out in bounded chunks (never one huge buffer)", async () => {
    const result = await exec("sh", ["-c", "head -c 1073741824 /dev/zero | zstd -c -q | base64 -w0"], {
      timeoutMs: 120_000,
    });
    const packed = Buffer.from(result.stdout, "base64");
    let total = 0;
    let largest = 0;
    for await (const chunk of decompress(pieces(packed, 65536), "zstd")) {
      total += chunk.length;
      largest = Math.max(largest, chunk.length);
    }
    expect(total).toBe(1024 * 1024 * 1024);
    expect(largest).toBeLessThanOrEqual(1024 * 1024);
  });

  it("a corrupt stream fails as image_format", async () => {
    const packed = gzipSync(sample);
    packed.fill(0x55, 20, 200);
    await expect(collect(decompress(pieces(packed), "gzip"))).rejects.toMatchObject({ code: "image_format" });
  });
});

describe("decompression bombs", () => {
  for (const tool of ["gzip", "zstd", "xz"] as const) {
    it(`${tool}: a stream that expands past maxBytes stops with image_limit, having produced at most that`, async () => {
      const bomb =
        tool === "gzip"
          ? gzipSync(Buffer.alloc(64 * 1024 * 1024))
          : await compressWith(tool, Buffer.alloc(64 * 1024 * 1024));
      expect(bomb.length).toBeLessThan(1024 * 1024);
      let produced = 0;
      const drain = async (): Promise<void> => {
        for await (const chunk of decompress(pieces(bomb), tool, 8 * 1024 * 1024)) produced += chunk.length;
      };
      await expect(drain()).rejects.toMatchObject({ code: "image_limit" });
      expect(produced).toBeLessThanOrEqual(8 * 1024 * 1024);
    });
  }
});
