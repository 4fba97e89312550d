import { describe, expect, it } from "vitest";
import { s3PresignedUrl } from "../../conductor/images/s3-presign.ts";

// AWS S3 API reference, "Authenticating Requests: Using Query Parameters (AWS Signature Version 4)",
// the presigned GET of examplebucket/test.txt on 2013-05-24, valid 86400 s.
const AWS_EXAMPLE = {
  endpoint: "https://s3.amazonaws.com",
  region: "us-east-1",
  bucket: "examplebucket",
  key: "test.txt",
  accessKeyId: "AKIAIOSFODNN7EXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
  expiresIn: 86400,
  now: new Date("2013-05-24T00:00:00Z"),
};
const AWS_EXAMPLE_URL =
  "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256" +
  "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request" +
  "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host" +
  "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";

describe("S3 SigV4 presigned URLs", () => {
  it("reproduces AWS's published presigned URL exactly", () => {
    expect(s3PresignedUrl(AWS_EXAMPLE)).toBe(AWS_EXAMPLE_URL);
  });

  it("path-style URLs put the bucket in the path and sign a different request", () => {
    const url = new URL(
      s3PresignedUrl({ ...AWS_EXAMPLE, endpoint: "http://127.0.0.1:9000", pathStyle: true }),
    );
    expect(url.host).toBe("127.0.0.1:9000");
    expect(url.pathname).toBe("/examplebucket/test.txt");
    expect(url.searchParams.get("X-Amz-Signature")).not.toBe(
      new URL(AWS_EXAMPLE_URL).searchParams.get("X-Amz-Signature"),
    );
  });

  it("encodes keys with spaces and unicode once, keeping slashes", () => {
    const url = s3PresignedUrl({ ...AWS_EXAMPLE, key: "images/my disk é.qcow2" });
    expect(url).toContain("/images/my%20disk%20%C3%A9.qcow2?");
  });

  it("carries a session token in the signed query", () => {
    const url = new URL(s3PresignedUrl({ ...AWS_EXAMPLE, sessionToken: "tok/en+1" }));
    expect(url.searchParams.get("X-Amz-Security-Token")).toBe("tok/en+1");
  });

  it("refuses expiries S3 would refuse", () => {
    expect(() => s3PresignedUrl({ ...AWS_EXAMPLE, expiresIn: 604_801 })).toThrow(/expiresIn/);
  });
});
