/**
 * Masking of secrets (BMC passwords, tokens, keys, and the credentials and signatures inside URLs) wherever a
 * document leaves the process: API, events, logs, node history.
 */

export const MASK = "******";

/** Keys whose values are secrets, at any depth: *password*, *secret*, *token*, *_key (any case). */
const SECRET_KEY = /password|passwd|secret|token|_key$|^key$|credential/i;

export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key);
}

// a URL's query parameters that carry a signature or a credential (Swift temp URLs, S3/GCS presigned URLs,
// Azure SAS, bearer tokens), besides the names isSecretKey already covers (x-amz-credential, token, ...)
const SECRET_QUERY = /^(temp_url_sig|sig|signature|x-amz-signature|x-goog-signature)$/i;
const URL_START = /^[a-z][a-z0-9+.-]*:\/\//i;
const USERINFO = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#@]*)@/i;

function decodeName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, " "));
  } catch {
    return name;
  }
}

/** Whether a URL carries credentials in its userinfo (`scheme://user:password@host`). */
export function hasUserinfo(url: string): boolean {
  return USERINFO.test(url);
}

/**
 * A URL with its secrets replaced by `******`: the userinfo's password (or a lone user, often a token) and
 * the values of query parameters that sign or authorise (temp_url_sig, X-Amz-Signature, X-Amz-Credential,
 * sig, token, ...). Any other string comes back as it is; the URL is not re-encoded.
 */
export function maskUrlSecrets(text: string): string {
  if (!URL_START.test(text)) return text;
  let out = text.replace(USERINFO, (_all, scheme: string, info: string) => {
    const colon = info.indexOf(":");
    return `${scheme}${colon < 0 ? MASK : `${info.slice(0, colon)}:${MASK}`}@`;
  });
  const query = out.indexOf("?");
  if (query < 0) return out;
  const hash = out.indexOf("#", query);
  const end = hash < 0 ? out.length : hash;
  const params = out
    .slice(query + 1, end)
    .split("&")
    .map((pair) => {
      const eq = pair.indexOf("=");
      if (eq < 0) return pair;
      const name = decodeName(pair.slice(0, eq));
      return SECRET_QUERY.test(name) || isSecretKey(name) ? `${pair.slice(0, eq)}=${MASK}` : pair;
    });
  out = `${out.slice(0, query + 1)}${params.join("&")}${out.slice(end)}`;
  return out;
}

function isPlainContainer(value: unknown): value is Record<string, unknown> | unknown[] {
  if (typeof value !== "object" || value === null) return false;
  if (Array.isArray(value)) return true;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** The common case, an object of scalars (driver_info), masked in one loop; null when it nests. */
function maskFlat(
  source: Record<string, unknown>,
  isSecret: (key: string) => boolean,
): Record<string, unknown> | null {
  const out: Record<string, unknown> = {};
  for (const key in source) {
    if (!Object.prototype.hasOwnProperty.call(source, key)) continue;
    const item = source[key];
    if ((typeof item === "object" && item !== null) || key === "__proto__") return null;
    out[key] =
      item !== null && item !== undefined && isSecret(key)
        ? MASK
        : typeof item === "string"
          ? maskUrlSecrets(item)
          : item;
  }
  return out;
}

type Container = Record<string, unknown> | unknown[];

// NOTE: module-level, not closures made per call: under tsx each closure made also gets its name set
// (esbuild's keepNames), a defineProperty that was ~12 µs of every POST /v1/nodes (cpu profile, bench:api)
const copyOf = (item: Container): Container => (Array.isArray(item) ? [] : {});

/** A plain child's (filled later) copy, queued on `stack`; strings URL-masked; others as they are. */
function visit(item: unknown, stack: [Container, Container][]): unknown {
  if (typeof item === "string") return maskUrlSecrets(item);
  if (!isPlainContainer(item)) return item;
  const copy = copyOf(item);
  stack.push([item, copy]);
  return copy;
}

/**
 * A copy of `value` with every secret-keyed value (at any depth, inside objects and arrays) replaced by
 * `******`; null values stay null so clients can tell "unset". Non-plain objects (errors, buffers) are kept
 * as they are. Iterative: a hostile document's depth cannot overflow the stack. `isSecret` widens what counts
 * as secret for one use (the node history also keeps config drives out).
 */
export function maskSecrets<T>(value: T, isSecret: (key: string) => boolean = isSecretKey): T {
  if (typeof value === "string") return maskUrlSecrets(value) as T;
  if (!isPlainContainer(value)) return value;
  if (!Array.isArray(value)) {
    const flat = maskFlat(value, isSecret);
    if (flat !== null) return flat as T;
  }
  const root = copyOf(value);
  const stack: [Container, Container][] = [[value, root]];
  while (stack.length > 0) {
    const [source, target] = stack.pop() as [Container, Container];
    if (Array.isArray(source)) {
      for (let i = 0; i < source.length; i++) (target as unknown[])[i] = visit(source[i], stack);
      continue;
    }
    const out = target as Record<string, unknown>;
    for (const key of Object.keys(source)) {
      const item = source[key];
      const shown = isSecret(key) && item !== null && item !== undefined ? MASK : visit(item, stack);
      // a "__proto__" key must stay an own key of the copy instead of replacing its prototype
      if (key === "__proto__") {
        Object.defineProperty(out, key, {
          value: shown,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      } else out[key] = shown;
    }
  }
  return root as T;
}

/** A URL a client read masked and sent back unchanged: the stored one, masked, reads the same. */
function isEchoedMaskedUrl(value: unknown, old: unknown): boolean {
  return (
    typeof value === "string" &&
    typeof old === "string" &&
    value !== old &&
    value.includes(MASK) &&
    maskUrlSecrets(old) === value
  );
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
      else if (isEchoedMaskedUrl(value, old)) (target as Record<string, unknown>)[key] = old;
      else stack.push([value, old]);
    }
  }
}

// `key=` / `key:` / `"key":` (the key's length bounded: a long word costs no more than a short one)
const KEY_SEP = /(?<![\w.-])(["']?)([A-Za-z_][\w.-]{0,63})\1([ \t]*[=:][ \t]*)/g;
// the value after a key: quoted (escapes allowed), or bare up to the next blank or double quote (a secret may hold `,` or `)`; a JSON string ends at `"`)
const VALUE = /"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s"]+/y;
// credentials after an HTTP authorization scheme (a header echoed in a log line)
const AUTH_SCHEME = /\b(Bearer|Basic|Negotiate)([ \t]+)[A-Za-z0-9._~+/=-]{4,}/g;
const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]{0,31}:\/\/[^\s"'<>`]+/gi;

/**
 * Free text (a log file, dmesg, a kernel command line, JSON printed as text) with its secrets replaced by
 * `******`: values of secret-named keys (`password=…`, `"token": "…"`, `ipmi_password: …`, also inside
 * another value: `"msg": "… password=x"`), credentials after `Bearer`/`Basic`, and URLs' passwords and
 * signatures (as maskUrlSecrets). Other text is left as it is. Linear in the text's length.
 */
export function maskSecretsInText(text: string): string {
  return maskPairs(
    text
      .replace(URL_IN_TEXT, (url) => maskUrlSecrets(url))
      .replace(AUTH_SCHEME, (_all, scheme: string, space: string) => `${scheme}${space}${MASK}`),
  );
}

/** Characters masked between two turns of the event loop: about a millisecond of work. */
export const MASK_SLICE_CHARS = 64 * 1024;

/**
 * maskSecretsInText for large text (a deploy log archive unpacks to tens of MiB) without holding the event
 * loop: masked in slices that each end just after a newline, yielding (setImmediate) between them. No pattern
 * spans a newline (keys, values, schemes and URLs stop at one), so the result is exactly maskSecretsInText's.
 * A line longer than a slice is masked whole.
 */
export async function maskSecretsInTextYielding(
  text: string,
  sliceChars = MASK_SLICE_CHARS,
): Promise<string> {
  if (text.length <= sliceChars) return maskSecretsInText(text);
  const parts: string[] = [];
  let start = 0;
  while (start < text.length) {
    const newline = text.indexOf("\n", start + sliceChars - 1);
    const end = newline < 0 ? text.length : newline + 1;
    parts.push(maskSecretsInText(text.slice(start, end)));
    start = end;
    if (start < text.length) await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return parts.join("");
}

function maskPairs(text: string): string {
  const keys = new RegExp(KEY_SEP.source, KEY_SEP.flags);
  const value = new RegExp(VALUE.source, VALUE.flags);
  let out = "";
  let copied = 0;
  for (let match = keys.exec(text); match !== null; match = keys.exec(text)) {
    // a key that names no secret: the scan goes on inside its value (a message holding `password=x`)
    if (!isSecretKey(match[2] ?? "")) continue;
    value.lastIndex = keys.lastIndex;
    const found = value.exec(text);
    if (found === null) continue;
    const quote = found[0][0] === '"' || found[0][0] === "'" ? found[0][0] : "";
    out += `${text.slice(copied, keys.lastIndex)}${quote}${MASK}${quote}`;
    copied = value.lastIndex;
    keys.lastIndex = value.lastIndex;
  }
  return out + text.slice(copied);
}
