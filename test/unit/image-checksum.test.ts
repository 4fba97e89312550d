import { createHash, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { HashingTap, parseChecksumFile } from "../../agent/image/checksum.ts";
import { ChecksumMismatchError, ImageError } from "../../agent/image/errors.ts";

const hex = (algo: string, data: string): string => createHash(algo).update(data).digest("hex");
async function* chunks(...parts: string[]): AsyncGenerator<Buffer> {
  for (const part of parts) yield Buffer.from(part);
}

describe("HashingTap", () => {
  it("hashes ~70 MiB of distinct odd-sized blocks, equal to a direct hash", async () => {
    // Distinct, odd-sized blocks: a wrap-around or ordering mistake changes the digest.
    const blocks = Array.from({ length: 60 }, (_, i) => randomBytes(1024 * 1024 + 4099 * i));
    async function* source(): AsyncGenerator<Buffer> {
      yield* blocks;
    }
    const tap = new HashingTap("sha256");
    let passed = 0;
    for await (const chunk of tap.pass(source())) passed += chunk.length;
    const direct = createHash("sha256");
    for (const block of blocks) direct.update(block);
    expect(passed).toBe(blocks.reduce((n, b) => n + b.length, 0));
    expect(tap.digest().value).toBe(direct.digest("hex"));
  });

  it("hashes what passes through, in pieces, and leaves the bytes untouched", async () => {
    const tap = new HashingTap("sha512");
    const seen: string[] = [];
    for await (const chunk of tap.pass(chunks("hello ", "wor", "ld"))) seen.push(chunk.toString());
    expect(seen.join("")).toBe("hello world");
    expect(tap.digest()).toEqual({ algo: "sha512", value: hex("sha512", "hello world") });
  });

  it("verify() throws a typed ChecksumMismatchError on a mismatch", async () => {
    const tap = new HashingTap("md5");
    for await (const _ of tap.pass(chunks("abc"))) void _;
    expect(() => tap.verify({ algo: "md5", value: hex("md5", "abd") })).toThrow(ChecksumMismatchError);
    expect(tap.verify({ algo: "md5", value: hex("md5", "abc").toUpperCase() }).value).toBe(hex("md5", "abc"));
  });
});

describe("parseChecksumFile", () => {
  const url = "http://images.example/v1/debian-12.qcow2?temp_url_sig=x";
  const sha = hex("sha256", "debian");

  it("picks the line naming the image in a sha256sum file", () => {
    const text = `${hex("sha256", "other")}  ubuntu.qcow2\n${sha}  debian-12.qcow2\n`;
    expect(parseChecksumFile(text, url)).toEqual({ algo: "sha256", value: sha });
  });

  it("accepts binary-mode (*name) and BSD-style lines", () => {
    expect(parseChecksumFile(`${sha} *debian-12.qcow2`, url).value).toBe(sha);
    const sha512 = hex("sha512", "x");
    expect(parseChecksumFile(`SHA512 (debian-12.qcow2) = ${sha512}`, url)).toEqual({
      algo: "sha512",
      value: sha512,
    });
  });

  it("accepts a bare digest and infers the algorithm from its length", () => {
    expect(parseChecksumFile(`${hex("md5", "x").toUpperCase()}\n`, url)).toEqual({
      algo: "md5",
      value: hex("md5", "x"),
    });
  });

  it("fails clearly when the image is not listed among several", () => {
    const text = `${sha}  a.img\n${sha}  b.img\n`;
    expect(() => parseChecksumFile(text, url)).toThrow(ImageError);
    expect(() => parseChecksumFile(text, url)).toThrow(/debian-12.qcow2/);
  });

  it("rejects digests of unknown length", () => {
    expect(() => parseChecksumFile("abcdef  debian-12.qcow2", url)).toThrow(/unknown length/);
  });
});
