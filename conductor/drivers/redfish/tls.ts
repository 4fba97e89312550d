import type { TLSSocket } from "node:tls";
import { buildConnector } from "undici";
import { normalizeFingerprint } from "../../../shared/tls-pin.ts";

/**
 * The pinned SHA-256 fingerprint in `redfish_verify_ca` (`sha256:` and 64 hex digits, colons as
 * `openssl x509 -fingerprint` prints them), upper-case hex without colons, or null for another value.
 */
export function parsePin(value: string): string | null {
  const text = value.trim();
  if (!/^sha256:/i.test(text)) return null;
  return normalizeFingerprint(text.slice("sha256:".length))?.toUpperCase() ?? null;
}

/** The fingerprint as operators read it: AB:CD:… */
export function formatPin(hex: string): string {
  return `sha256:${hex.match(/../g)?.join(":") ?? hex}`;
}

/** The certificate did not carry the pinned fingerprint: never retried, never answered unverified. */
export class PinMismatch extends Error {
  readonly code = "ERR_REDFISH_PIN_MISMATCH";

  constructor(expected: string, actual: string | undefined) {
    super(
      `the BMC's certificate fingerprint ${actual ? formatPin(actual) : "(none)"} does not match ` +
        `redfish_verify_ca ${formatPin(expected)}`,
    );
    this.name = "PinMismatch";
  }
}

/**
 * An undici connector that trusts exactly one leaf certificate: the chain is not checked against any CA (a
 * pinned BMC certificate is usually self-signed), the leaf's SHA-256 fingerprint must equal the pin, and a
 * connection whose leaf does not is destroyed before a byte of the request is written. TLS session
 * resumption is off so every connection shows its certificate.
 */
export function pinnedConnector(pin: string, timeoutMs: number): buildConnector.connector {
  const connect = buildConnector({ rejectUnauthorized: false, maxCachedSessions: 0, timeout: timeoutMs });
  return (options, callback) => {
    connect(options, (error, socket) => {
      if (error || !socket) {
        callback(error ?? new Error("no socket"), null);
        return;
      }
      const printed = (socket as TLSSocket).getPeerCertificate?.()?.fingerprint256;
      const actual = printed === undefined ? undefined : normalizeFingerprint(printed)?.toUpperCase();
      if (actual !== pin) {
        socket.destroy();
        callback(new PinMismatch(pin, actual), null);
        return;
      }
      callback(null, socket);
    });
  };
}
