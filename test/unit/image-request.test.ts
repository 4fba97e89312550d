import { describe, expect, it } from "vitest";
import { Invalid } from "../../conductor/errors.ts";
import { writeRequestFromInstanceInfo } from "../../conductor/images/image-request.ts";

const sign = (source: URL): string =>
  `https://objects.example/${source.protocol.replace(":", "")}${source.pathname}?sig=1`;

describe("writeRequestFromInstanceInfo: image_bmap", () => {
  it("passes an http(s) block map through and signs swift://, s3:// and file:// ones like image_source", () => {
    const plain = writeRequestFromInstanceInfo(
      { image_source: "http://images/disk.raw", image_bmap: "http://images/disk.bmap" },
      { sign },
    );
    expect(plain.image.block_map).toBe("http://images/disk.bmap");
    const signed = writeRequestFromInstanceInfo(
      { image_source: "s3://bucket/disk.raw", image_bmap: "file:///srv/images/disk.bmap" },
      { sign },
    );
    expect(signed.image.url).toBe("https://objects.example/s3/disk.raw?sig=1");
    expect(signed.image.block_map).toBe("https://objects.example/file/srv/images/disk.bmap?sig=1");
    expect(
      writeRequestFromInstanceInfo({ image_source: "http://i/d.raw" }, { sign }).image.block_map,
    ).toBeUndefined();
  });

  it("a block map that is not a URL is a 400 naming the field", () => {
    const attempt = (): unknown =>
      writeRequestFromInstanceInfo({ image_source: "http://i/d.raw", image_bmap: "disk.bmap" }, { sign });
    expect(attempt).toThrow(Invalid);
    expect(attempt).toThrow(/instance_info\.image_bmap "disk\.bmap" is not a URL/);
  });
});

describe("writeRequestFromInstanceInfo: image CA", () => {
  const sign = (): string => "unused";
  const PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  it("instance_info.image_ca_cert wins over the conductor's default; neither means the system CAs", () => {
    const info = { image_source: "https://images.example/a.raw" };
    expect(writeRequestFromInstanceInfo(info, { sign }).image.ca).toBeUndefined();
    expect(writeRequestFromInstanceInfo(info, { sign, imageCa: PEM }).image.ca).toBe(PEM);
    expect(
      writeRequestFromInstanceInfo({ ...info, image_ca_cert: "own" }, { sign, imageCa: PEM }).image.ca,
    ).toBe("own");
  });
});
