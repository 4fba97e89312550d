import { InvalidDriverInfo } from "../errors.ts";

const KEY = /^[A-Za-z0-9_.-]+$/;
// Printable ASCII without whitespace, quotes, backslash or "$": a value can neither split the kernel
// command line nor start an iPXE/GRUB variable expansion nor end a config line.
const VALUE = /^[\x21-\x7e]*$/;
const FORBIDDEN = /["'\\$`;]/;

/**
 * Formats kernel arguments as "key=value" words, in insertion order.
 * @throws InvalidDriverInfo naming the first argument that could break out of the command line.
 */
export function formatKernelArgs(args: Record<string, string>): string[] {
  return Object.entries(args).map(([key, value]) => {
    if (!KEY.test(key))
      throw new InvalidDriverInfo(`kernel argument name ${JSON.stringify(key)} is not allowed`);
    if (!VALUE.test(value) || FORBIDDEN.test(value)) {
      throw new InvalidDriverInfo(
        `kernel argument ${key} has a value that is not allowed: ${JSON.stringify(value)}`,
      );
    }
    return `${key}=${value}`;
  });
}

/** @throws InvalidDriverInfo unless every word is one safe kernel command line word. */
export function checkKernelWords(words: readonly string[]): string[] {
  for (const word of words) {
    if (word === "" || !VALUE.test(word) || FORBIDDEN.test(word)) {
      throw new InvalidDriverInfo(`kernel argument ${JSON.stringify(word)} is not allowed`);
    }
  }
  return [...words];
}
