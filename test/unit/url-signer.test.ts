import { beforeAll, describe, expect, it } from "vitest";
import { defaultConfig } from "../../conductor/config.ts";
import { createUrlSigner, localImagePath } from "../../conductor/images/url-signer.ts";
import { ImageLinks } from "../../conductor/images/signed-links.ts";
import { swiftTempUrlSignature } from "../../conductor/images/swift-tempurl.ts";

const NOW = Date.UTC(2026, 10, 22, 12, 0, 0);

describe("image URL signing", () => {
  const config = defaultConfig({
    publicUrl: "http://192.0.2.1:6385",
    images: {
      localRoot: "/srv/images",
      urlExpiresS: 600,
      swift: { endpoint: "https://swift.example.com", account: "AUTH_test", tempUrlKey: "k", digest: "sha1" },
      s3: {
        endpoint: "http://127.0.0.1:9000",
        region: "us-east-1",
        accessKeyId: "AK",
        secretAccessKey: "SK",
      },
    },
  });
  const links = new ImageLinks(() => NOW);
  const sign = createUrlSigner(config, { now: () => NOW, links });
  beforeAll(() => links.load({ sharedSecret: (_name, candidate) => Promise.resolve(candidate) }));

  it("turns swift:// into a TempURL that expires after the configured lifetime", () => {
    const url = new URL(sign(new URL("swift://images/ubuntu/22.04.qcow2")));
    const expires = NOW / 1000 + 600;
    expect(url.origin + url.pathname).toBe(
      "https://swift.example.com/v1/AUTH_test/images/ubuntu/22.04.qcow2",
    );
    expect(url.searchParams.get("temp_url_expires")).toBe(String(expires));
    expect(url.searchParams.get("temp_url_sig")).toBe(
      swiftTempUrlSignature({
        path: "/v1/AUTH_test/images/ubuntu/22.04.qcow2",
        key: "k",
        expires,
        digest: "sha1",
      }),
    );
  });

  it("turns s3:// into a presigned path-style URL", () => {
    const url = new URL(sign(new URL("s3://bucket/dir/disk.raw")));
    expect(url.origin + url.pathname).toBe("http://127.0.0.1:9000/bucket/dir/disk.raw");
    expect(url.searchParams.get("X-Amz-Expires")).toBe("600");
    expect(url.searchParams.get("X-Amz-Credential")).toBe("AK/20261122/us-east-1/s3/aws4_request");
    expect(url.searchParams.get("X-Amz-Signature")).toMatch(/^[0-9a-f]{64}$/);
  });

  it("serves file:// images under the local root from the conductor, and nothing outside it", () => {
    const url = sign(new URL("file:///srv/images/os/disk.qcow2"));
    expect(url).toMatch(/^http:\/\/192\.0\.2\.1:6385\/images\/os\/disk\.qcow2\?anvil_expires=\d+&anvil_sig=/);
    expect(links.check(url.slice("http://192.0.2.1:6385".length))).toBe("ok");
    expect(() => sign(new URL("file:///etc/shadow"))).toThrow(/outside/);
    expect(localImagePath("/srv/images", "/srv/images/../images2/x")).toBeNull();
    expect(localImagePath("/srv/images", "/srv/images")).toBeNull();
  });

  it("refuses schemes it cannot sign, and unconfigured stores", () => {
    expect(() => sign(new URL("ftp://host/disk"))).toThrow(/not supported/);
    const bare = createUrlSigner(defaultConfig({}));
    expect(() => bare(new URL("swift://c/o"))).toThrow(/Swift settings/);
    expect(() => bare(new URL("s3://b/k"))).toThrow(/S3 settings/);
  });
});
