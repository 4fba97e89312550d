import { describe, expect, it } from "vitest";
import { swiftTempUrl, swiftTempUrlSignature } from "../../conductor/images/swift-tempurl.ts";

// Swift's tempurl middleware documentation: key "mykey", GET, expires 1516741234,
// path /v1/AUTH_account/container/object, HMAC-SHA512 in URL-safe base64.
const SWIFT_DOC_SHA512 =
  "sha512:ZrSijn0GyDhsv1ltIj9hWUTrbAeE45NcKXyBaz7aPbSMvROQ4jtYH4nRAmm5ErY2X11Yc1Yhy2OMCyN3yueeXg==";
const base = { path: "/v1/AUTH_account/container/object", key: "mykey", expires: 1516741234 };

describe("Swift TempURL", () => {
  it("reproduces the sha512 signature published in Swift's documentation", () => {
    expect(swiftTempUrlSignature({ ...base, digest: "sha512" })).toBe(SWIFT_DOC_SHA512);
  });

  it("signs with HMAC-SHA1 in hex by default, as Ironic does", () => {
    // Same message and key as the published vector; value computed with Python's hmac module.
    expect(swiftTempUrlSignature(base)).toBe("712dcef48d391e39bd2e3b63fc0a07146a36055e");
  });

  it("signs with HMAC-SHA256 in hex", () => {
    expect(swiftTempUrlSignature({ ...base, digest: "sha256" })).toBe(
      "b230eeea40cafd23d6db5bbe766b606e201815952347be46ac8cab416564e4f4",
    );
  });

  it("the method is part of what is signed", () => {
    expect(swiftTempUrlSignature({ ...base, method: "PUT" })).not.toBe(swiftTempUrlSignature(base));
  });

  it("builds the URL with temp_url_sig and temp_url_expires", () => {
    const url = new URL(swiftTempUrl({ ...base, endpoint: "https://swift.example.com/", digest: "sha512" }));
    expect(url.origin + url.pathname).toBe("https://swift.example.com/v1/AUTH_account/container/object");
    expect(url.searchParams.get("temp_url_sig")).toBe(SWIFT_DOC_SHA512);
    expect(url.searchParams.get("temp_url_expires")).toBe("1516741234");
  });

  it("refuses a path that is not a /v1/ object path", () => {
    expect(() => swiftTempUrl({ ...base, path: "/container/object", endpoint: "https://s" })).toThrow(/v1/);
  });
});
