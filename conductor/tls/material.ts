import { readFileSync } from "node:fs";
import { fingerprintOfPem } from "../../shared/tls-pin.ts";

export interface TlsSettings {
  cert?: string;
  key?: string;
  ca?: string;
}

/** What the conductor serves HTTPS/WSS with, and what its agents pin. */
export interface TlsMaterial {
  cert: string;
  key: string;
  /** SHA-256 of the CA certificate (tls.ca) if given, else of the server certificate itself. */
  pin: string;
  /** PEM that peers presenting this material are checked against: the CA (tls.ca), else the certificate. */
  trust: string;
}

/**
 * Reads the certificate and key files; null when TLS is off (neither given).
 * @throws Error when only one of cert and key is given, or a file is unreadable or not PEM
 */
export function loadTlsMaterial(tls: TlsSettings): TlsMaterial | null {
  if (tls.cert === undefined && tls.key === undefined) return null;
  if (tls.cert === undefined || tls.key === undefined) throw new Error("TLS needs both tls.cert and tls.key");
  const leaf = readFileSync(tls.cert, "utf8");
  const key = readFileSync(tls.key, "utf8");
  if (tls.ca === undefined) return { cert: leaf, key, pin: fingerprintOfPem(leaf), trust: leaf };
  const ca = readFileSync(tls.ca, "utf8");
  // serve the chain with the CA in it: an agent holding only the CA's fingerprint needs to see it
  const cert = leaf.includes(ca.trim()) ? leaf : `${leaf.trimEnd()}\n${ca.trim()}\n`;
  return { cert, key, pin: fingerprintOfPem(ca), trust: ca };
}
