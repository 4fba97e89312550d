import { normalizeFingerprint } from "../shared/tls-pin.ts";

/** Splits a kernel command line into key → value ("quiet" → ""); quoted values keep their spaces. */
export function parseKernelCmdline(text: string): Map<string, string> {
  const params = new Map<string, string>();
  for (const match of text.matchAll(/(?:[^\s"]+|"[^"]*")+/g)) {
    const token = match[0];
    const eq = token.indexOf("=");
    const key = eq < 0 ? token : token.slice(0, eq);
    const value = eq < 0 ? "" : token.slice(eq + 1).replace(/^"(.*)"$/, "$1");
    params.set(key, value);
  }
  return params;
}

/**
 * The conductor certificate pin from anvil.ca_fingerprint= (SHA-256, hex, colons allowed), or undefined
 * when absent. @throws Error when present but not a SHA-256 fingerprint (better no link than an unpinned one)
 */
export function caFingerprintOf(params: Map<string, string>): string | undefined {
  const value = params.get("anvil.ca_fingerprint");
  if (value === undefined || value === "") return undefined;
  const hex = normalizeFingerprint(value);
  if (hex === null) throw new Error(`anvil.ca_fingerprint is not a SHA-256 fingerprint: ${value}`);
  return hex;
}
