import { createHmac } from "node:crypto";

export const SWIFT_DIGESTS = ["sha1", "sha256", "sha512"] as const;
export type SwiftDigest = (typeof SWIFT_DIGESTS)[number];

export interface SwiftTempUrlOptions {
  /** Scheme and host of the Swift proxy, e.g. "https://swift.example.com" (a path prefix is kept). */
  endpoint: string;
  /** The object's path from /v1/ on: "/v1/AUTH_account/container/object". */
  path: string;
  /** The account's or container's Temp-URL-Key. */
  key: string;
  /** Unix seconds at which the URL stops working. */
  expires: number;
  method?: "GET" | "HEAD" | "PUT";
  /** sha1 (Swift's default and Ironic's), sha256 or sha512. */
  digest?: SwiftDigest;
}

/**
 * The signature Swift's tempurl middleware expects: HMAC of "METHOD\nEXPIRES\nPATH" with the Temp-URL-Key.
 * Hex for sha1/sha256; "sha512:" + URL-safe base64 for sha512 (Swift requires the prefixed form there).
 */
export function swiftTempUrlSignature(options: Omit<SwiftTempUrlOptions, "endpoint">): string {
  const digest = options.digest ?? "sha1";
  const body = `${options.method ?? "GET"}\n${options.expires}\n${options.path}`;
  const mac = createHmac(digest, options.key).update(body);
  if (digest === "sha512") {
    return `sha512:${mac.digest("base64").replace(/\+/g, "-").replace(/\//g, "_")}`;
  }
  return mac.digest("hex");
}

/** A Swift TempURL for an object: `ENDPOINT/v1/…/object?temp_url_sig=…&temp_url_expires=…`. */
export function swiftTempUrl(options: SwiftTempUrlOptions): string {
  if (!options.path.startsWith("/v1/"))
    throw new Error(`Swift object path must start with /v1/: ${options.path}`);
  if (!Number.isInteger(options.expires) || options.expires <= 0)
    throw new Error("expires must be unix seconds");
  const query = new URLSearchParams({
    temp_url_sig: swiftTempUrlSignature(options),
    temp_url_expires: String(options.expires),
  });
  return `${options.endpoint.replace(/\/+$/, "")}${options.path}?${query.toString()}`;
}
