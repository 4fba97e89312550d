import { normalizeFingerprint } from "../shared/tls-pin.ts";

/** The kernel command line's words, split as the kernel does: quoted values keep their spaces. */
function kernelWords(text: string): [key: string, value: string][] {
  const words: [string, string][] = [];
  for (const match of text.matchAll(/(?:[^\s"]+|"[^"]*")+/g)) {
    const token = match[0];
    const eq = token.indexOf("=");
    const key = eq < 0 ? token : token.slice(0, eq);
    const value = eq < 0 ? "" : token.slice(eq + 1).replace(/^"(.*)"$/, "$1");
    words.push([key, value]);
  }
  return words;
}

/** Splits a kernel command line into key → value ("quiet" → ""); a repeated key keeps its last value. */
export function parseKernelCmdline(text: string): Map<string, string> {
  return new Map(kernelWords(text));
}

/** Every value a key is given on the kernel command line, in order ("anvil.x" alone gives ""). */
export function kernelParamValues(text: string, key: string): string[] {
  return kernelWords(text)
    .filter(([name]) => name === key)
    .map(([, value]) => value);
}

export const PIN_PARAM = "anvil.ca_fingerprint";

/**
 * The conductor certificate pin from every anvil.ca_fingerprint= given (SHA-256, hex, colons allowed), or
 * undefined when none is. An empty or malformed value, or two values naming different fingerprints, is an
 * error: an agent that was meant to pin must stop rather than dial unpinned or guess which pin is meant.
 * @throws Error naming the parameter and what is wrong with it
 */
export function pinFromValues(values: readonly string[]): string | undefined {
  const pins = new Set<string>();
  for (const value of values) {
    if (value.trim() === "") throw new Error(`${PIN_PARAM} is empty: refusing to dial without the pin`);
    const hex = normalizeFingerprint(value.trim());
    if (hex === null) throw new Error(`${PIN_PARAM} is not a SHA-256 fingerprint: ${value.slice(0, 120)}`);
    pins.add(hex);
  }
  if (pins.size > 1) {
    throw new Error(
      `${PIN_PARAM} is given ${values.length} times with different fingerprints: refusing to guess`,
    );
  }
  return [...pins][0];
}

/**
 * The pin from parameters as the conductor writes them (one value per key), or undefined when absent.
 * @throws Error when present but empty or not a SHA-256 fingerprint
 */
export function caFingerprintOf(params: Map<string, string>): string | undefined {
  const value = params.get(PIN_PARAM);
  return pinFromValues(value === undefined ? [] : [value]);
}
