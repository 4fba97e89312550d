import { X509Certificate } from "node:crypto";

/** A SHA-256 certificate fingerprint as 64 lowercase hex digits (colons and case as openssl or Node print them are accepted). */
export function normalizeFingerprint(text: string): string | null {
  const hex = text.replace(/:/g, "").toLowerCase();
  return /^[0-9a-f]{64}$/.test(hex) ? hex : null;
}

/** The SHA-256 fingerprint of the first certificate of a PEM text (64 hex digits). @throws on bad PEM */
export function fingerprintOfPem(pem: string): string {
  return normalizeFingerprint(new X509Certificate(pem).fingerprint256) ?? "";
}

/** A certificate as a TLS peer presents it (Node's getPeerCertificate(true)): DER, and its issuer. */
export interface PeerCertificate {
  raw?: Buffer;
  issuerCertificate?: PeerCertificate;
}

/**
 * The PEM of the certificate in a presented chain whose SHA-256 is `pin`, or null. This only FINDS the
 * pinned certificate (a hash match makes it authentic whoever sent it); it says nothing about the chain:
 * the caller hands it to OpenSSL as the sole trust anchor for a verified handshake. Never throws.
 */
export function pinnedCertificateIn(leaf: PeerCertificate | undefined, pin: string): string | null {
  const seen = new Set<PeerCertificate>();
  for (let cert = leaf; cert?.raw && !seen.has(cert) && seen.size < 10; cert = cert.issuerCertificate) {
    seen.add(cert); // a self-signed root is its own issuer
    try {
      const x509 = new X509Certificate(cert.raw);
      if (normalizeFingerprint(x509.fingerprint256) === pin) return x509.toString();
    } catch {
      // an unparsable certificate is not the pinned one
    }
  }
  return null;
}
