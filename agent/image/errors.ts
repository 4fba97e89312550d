/** Typed failures of the image pipeline; `retryable` says whether starting the write over may help. */
export class ImageError extends Error {
  constructor(
    message: string,
    readonly code: ImageErrorCode,
    readonly retryable = false,
  ) {
    super(message);
    this.name = "ImageError";
  }
}

export type ImageErrorCode =
  | "http_status"
  | "http_range"
  | "http_stall"
  | "http_connection"
  | "http_protocol"
  | "checksum_mismatch"
  | "checksum_file"
  | "image_format"
  | "qcow2_unsupported"
  | "qcow2_out_of_order"
  /** A bound on a hostile image: decompressed bytes, qcow2 tables out of proportion, a cluster's inflation. */
  | "image_limit"
  | "target"
  | "configdrive";

/** The server answered with a status we will not retry (4xx), or kept failing (5xx). */
export class HttpStatusError extends ImageError {
  constructor(
    readonly url: string,
    readonly status: number,
  ) {
    super(`GET ${redactQuery(url)} answered HTTP ${status}`, "http_status", status >= 500);
    this.name = "HttpStatusError";
  }
}

export class ChecksumMismatchError extends ImageError {
  constructor(
    readonly algo: string,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(`image ${algo} mismatch: expected ${expected}, got ${actual}`, "checksum_mismatch", true);
    this.name = "ChecksumMismatchError";
  }
}

/** Temp URLs carry their signature in the query: keep it out of messages and logs. */
export function redactQuery(url: string): string {
  const q = url.indexOf("?");
  return q === -1 ? url : `${url.slice(0, q)}?…`;
}
