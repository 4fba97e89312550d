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

function presentedChain(leaf: PeerCertificate | undefined): X509Certificate[] {
  const chain: X509Certificate[] = [];
  const seen = new Set<PeerCertificate>();
  for (let cert = leaf; cert?.raw && !seen.has(cert) && chain.length < 10; cert = cert.issuerCertificate) {
    seen.add(cert); // a self-signed root is its own issuer
    chain.push(new X509Certificate(cert.raw));
  }
  return chain;
}

const fingerprintOf = (cert: X509Certificate): string | null => normalizeFingerprint(cert.fingerprint256);
const current = (cert: X509Certificate, now: Date): boolean =>
  Date.parse(cert.validFrom) <= now.getTime() && now.getTime() <= Date.parse(cert.validTo);

/**
 * Whether the presented chain leads from the leaf to the pinned certificate: the leaf itself, or a CA that
 * really signed it (each link's issuer checked and its signature verified, every certificate on the way
 * current). Naming the pinned CA in a chain is not enough: its certificate is public, anyone can append it.
 * Pure but for the clock. Never throws (unparsable certificates match nothing).
 */
export function chainMatchesPin(leaf: PeerCertificate | undefined, pin: string, now = new Date()): boolean {
  let chain: X509Certificate[];
  try {
    chain = presentedChain(leaf);
  } catch {
    return false;
  }
  const at = chain.findIndex((cert) => fingerprintOf(cert) === pin);
  if (at < 0) return false;
  for (let i = 0; i <= at; i++) {
    const cert = chain[i]!;
    if (!current(cert, now)) return false;
    if (i === at) break;
    const issuer = chain[i + 1]!;
    if (!cert.checkIssued(issuer) || !cert.verify(issuer.publicKey)) return false;
  }
  return true;
}
