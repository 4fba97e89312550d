import { createHash, createHmac } from "node:crypto";

export interface S3PresignOptions {
  /** "https://s3.amazonaws.com", or an S3-compatible endpoint such as "http://127.0.0.1:9000". */
  endpoint: string;
  region: string;
  bucket: string;
  key: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** For temporary credentials: sent as X-Amz-Security-Token. */
  sessionToken?: string;
  /** Seconds the URL stays valid (1 to 604800). */
  expiresIn: number;
  method?: "GET" | "HEAD" | "PUT";
  /** `bucket.host` (AWS's default) or `host/bucket` (most S3-compatible stores). Default virtual-hosted. */
  pathStyle?: boolean;
  /** Signing time; default now. */
  now?: Date;
}

/** RFC 3986 encoding as SigV4 wants it: only unreserved characters stay; "/" too when `keepSlash`. */
function uriEncode(value: string, keepSlash = false): string {
  return [...Buffer.from(value, "utf8")]
    .map((byte) => {
      const c = String.fromCharCode(byte);
      if (/[A-Za-z0-9\-._~]/.test(c) || (keepSlash && c === "/")) return c;
      return `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
    })
    .join("");
}

const hmac = (key: Buffer | string, data: string): Buffer => createHmac("sha256", key).update(data).digest();
const sha256Hex = (data: string): string => createHash("sha256").update(data).digest("hex");

/**
 * An AWS Signature Version 4 presigned URL (query-string authentication, UNSIGNED-PAYLOAD, host the only
 * signed header), as S3 and S3-compatible stores (radosgw, MinIO) accept.
 * @throws Error when expiresIn is out of S3's range
 */
export function s3PresignedUrl(options: S3PresignOptions): string {
  if (!Number.isInteger(options.expiresIn) || options.expiresIn < 1 || options.expiresIn > 604_800) {
    throw new Error("expiresIn must be 1..604800 seconds");
  }
  const endpoint = new URL(options.endpoint);
  const host = options.pathStyle ? endpoint.host : `${options.bucket}.${endpoint.host}`;
  const prefix = endpoint.pathname.replace(/\/+$/, "");
  const objectPath = options.pathStyle
    ? `${prefix}/${options.bucket}/${options.key}`
    : `${prefix}/${options.key}`;
  const canonicalUri = uriEncode(objectPath, true);

  const now = options.now ?? new Date();
  const amzDate = now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
  const day = amzDate.slice(0, 8);
  const scope = `${day}/${options.region}/s3/aws4_request`;
  const params: [string, string][] = [
    ["X-Amz-Algorithm", "AWS4-HMAC-SHA256"],
    ["X-Amz-Credential", `${options.accessKeyId}/${scope}`],
    ["X-Amz-Date", amzDate],
    ["X-Amz-Expires", String(options.expiresIn)],
    ["X-Amz-SignedHeaders", "host"],
  ];
  if (options.sessionToken !== undefined) params.push(["X-Amz-Security-Token", options.sessionToken]);
  const canonicalQuery = params
    .map(([k, v]) => [uriEncode(k), uriEncode(v)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&");
  const canonicalRequest = [
    options.method ?? "GET",
    canonicalUri,
    canonicalQuery,
    `host:${host}\n`,
    "host",
    "UNSIGNED-PAYLOAD",
  ].join("\n");
  const stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256Hex(canonicalRequest)].join("\n");
  let signingKey = hmac(`AWS4${options.secretAccessKey}`, day);
  for (const part of [options.region, "s3", "aws4_request"]) signingKey = hmac(signingKey, part);
  const signature = hmac(signingKey, stringToSign).toString("hex");
  return `${endpoint.protocol}//${host}${canonicalUri}?${canonicalQuery}&X-Amz-Signature=${signature}`;
}
