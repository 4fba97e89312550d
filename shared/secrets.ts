/** Masking of secrets (BMC passwords, tokens, keys) wherever a document leaves the process: API, events, logs. */

export const MASK = "******";

/** Keys whose values are secrets, at any depth: *password*, *secret*, *token*, *_key (any case). */
const SECRET_KEY = /password|passwd|secret|token|_key$|^key$|credential/i;

export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key);
}

function isPlainContainer(value: unknown): value is Record<string, unknown> | unknown[] {
  if (typeof value !== "object" || value === null) return false;
  if (Array.isArray(value)) return true;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * A copy of `value` with every secret-keyed value (at any depth, inside objects and arrays) replaced by
 * `******`; null values stay null so clients can tell "unset". Non-plain objects (errors, buffers) are kept
 * as they are. Iterative: a hostile document's depth cannot overflow the stack.
 */
export function maskSecrets<T>(value: T): T {
  if (!isPlainContainer(value)) return value;
  const root: Record<string, unknown> | unknown[] = Array.isArray(value) ? [] : {};
  const stack: [Record<string, unknown> | unknown[], Record<string, unknown> | unknown[]][] = [[value, root]];
  while (stack.length > 0) {
    const [source, target] = stack.pop() as [
      Record<string, unknown> | unknown[],
      Record<string, unknown> | unknown[],
    ];
    const entries: [string, unknown][] = Array.isArray(source)
      ? source.map((item, index) => [String(index), item])
      : Object.entries(source);
    for (const [key, item] of entries) {
      let out: unknown = item;
      if (!Array.isArray(source) && isSecretKey(key) && item !== null && item !== undefined) out = MASK;
      else if (isPlainContainer(item)) {
        const copy: Record<string, unknown> | unknown[] = Array.isArray(item) ? [] : {};
        stack.push([item, copy]);
        out = copy;
      }
      // defineProperty: a "__proto__" key stays an own key of the copy instead of replacing its prototype
      Object.defineProperty(target, key, {
        value: out,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }
  return root as T;
}

/**
 * Puts back the real secrets a client echoed as `******` (it read a masked view and sent it back), at any
 * depth: wherever `next` holds the mask and `previous` has a value at the same path. Mutates `next`.
 */
export function restoreMaskedSecrets(next: unknown, previous: unknown): void {
  const stack: [unknown, unknown][] = [[next, previous]];
  while (stack.length > 0) {
    const [target, source] = stack.pop() as [unknown, unknown];
    if (!isPlainContainer(target) || !isPlainContainer(source)) continue;
    if (Array.isArray(target) !== Array.isArray(source)) continue;
    for (const key of Object.keys(target)) {
      if (!Object.prototype.hasOwnProperty.call(source, key)) continue;
      const value = (target as Record<string, unknown>)[key];
      const old = (source as Record<string, unknown>)[key];
      if (value === MASK && old !== undefined) (target as Record<string, unknown>)[key] = old;
      else stack.push([value, old]);
    }
  }
}
