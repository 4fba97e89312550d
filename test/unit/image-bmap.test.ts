import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, open, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseBlockMap } from "../../agent/image/bmap.ts";
import { ImageError } from "../../agent/image/errors.ts";
import { runOk } from "../helpers/run.ts";

const KiB = 1024;
const MiB = 1024 * KiB;
let dir: string;
let xml: string;
let image: Buffer;

/** Data at 1 MiB (3 blocks), 5 MiB (2 MiB) and a partial last block; zeros elsewhere. */
const DATA = [
  { at: MiB, length: 12 * KiB },
  { at: 5 * MiB, length: 2 * MiB },
  { at: 16 * MiB, length: 1000 },
];
const SIZE = 16 * MiB + 1000;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "anvil-bmap-"));
  const path = join(dir, "image.raw");
  await writeFile(path, "");
  await truncate(path, SIZE);
  const handle = await open(path, "r+");
  for (const { at, length } of DATA) await handle.write(randomBytes(length), 0, length, at);
  await handle.close();
  // The real tool, as operators and Yocto make block maps.
  await runOk("bmaptool", ["create", path, "-o", join(dir, "image.bmap")]);
  xml = await readFile(join(dir, "image.bmap"), "utf8");
  image = await readFile(path);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("parseBlockMap", () => {
  it("reads bmaptool's map: the data ranges, sizes and per-range sha256 digests", () => {
    const map = parseBlockMap(xml);
    expect(map.imageSize).toBe(SIZE);
    expect(map.blockSize).toBe(4096);
    expect(map.checksumType).toBe("sha256");
    expect(map.ranges.map((r) => [r.start, r.end])).toEqual(DATA.map(({ at, length }) => [at, at + length]));
    expect(map.mappedBytes).toBe(DATA.reduce((n, d) => n + d.length, 0));
    for (const range of map.ranges) {
      const digest = createHash("sha256").update(image.subarray(range.start, range.end)).digest("hex");
      expect(range.checksum).toBe(digest);
    }
  });

  it("a map edited after bmaptool wrote it fails its own checksum", () => {
    const edited = xml.replace(/> (\d+)-(\d+) </, (_m, a: string, b: string) => `> ${a}-${Number(b) + 1} <`);
    expect(edited).not.toBe(xml);
    expect(() => parseBlockMap(edited)).toThrow(/own sha256 checksum does not match/);
  });

  it("an older 1.x map without digests is accepted; ranges past the image or out of order are not", () => {
    const v1 = (ranges: string): string =>
      `<?xml version="1.0" ?><bmap version="1.2"><ImageSize> 40960 </ImageSize><BlockSize> 4096 </BlockSize>` +
      `<BlocksCount> 10 </BlocksCount><MappedBlocksCount> 3 </MappedBlocksCount><BlockMap>${ranges}</BlockMap></bmap>`;
    const map = parseBlockMap(v1("<Range> 0-1 </Range><Range> 7 </Range>"));
    expect(map.checksumType).toBeUndefined();
    expect(map.ranges).toEqual([
      { start: 0, end: 8192, checksum: undefined },
      { start: 28672, end: 32768, checksum: undefined },
    ]);
    expect(() => parseBlockMap(v1("<Range> 0-1 </Range><Range> 10 </Range>"))).toThrow(/outside the image/);
    expect(() => parseBlockMap(v1("<Range> 5 </Range><Range> 0-1 </Range>"))).toThrow(/out of order/);
    expect(() => parseBlockMap(v1("<Range> 0 </Range>"))).toThrow(/declares 3 mapped blocks/);
  });

  it("something that is not a block map is refused with an ImageError", () => {
    for (const text of ["", "<html>Not Found</html>", '<bmap version="3.0"></bmap>']) {
      expect(() => parseBlockMap(text)).toThrow(ImageError);
    }
  });
});
