/**
 * Python's `str.format` as inspection rules use it ("{inventory[cpu][count]}", "{node.properties[cpus]}",
 * "{item[path]}"): field lookups by `[key]` and `.attribute`, `{{`/`}}` escapes, and `str()` of the value.
 * Conversions and format specs are not supported: such a field fails like any other failed lookup.
 */

/** Why a format failed, as Python's exception classes name it (is-empty treats a KeyError as no value). */
export class FormatError extends Error {
  constructor(
    readonly kind: "KeyError" | "IndexError" | "TypeError" | "ValueError" | "AttributeError",
    message: string,
  ) {
    super(message);
  }
}

/**
 * A string as Python's repr() writes it: Ironic's PatchError quotes the failed operation as a dict, and
 * clients match texts after their own repr() of stderr, where a `"` in the text would turn `can't` into
 * `can\'t` (python-ironicclient's functional suite does).
 */
export function pythonRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = "";
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (ch === "\\") out += "\\\\";
    else if (ch === quote) out += `\\${ch}`;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return `${quote}${out}${quote}`;
}

/** Python's repr of a JSON value. */
export function pyRepr(value: unknown): string {
  if (typeof value === "string") return pythonRepr(value);
  if (Array.isArray(value)) return `[${value.map(pyRepr).join(", ")}]`;
  if (value !== null && typeof value === "object")
    return `{${Object.entries(value)
      .map(([k, v]) => `${pyRepr(k)}: ${pyRepr(v)}`)
      .join(", ")}}`;
  return pyStr(value);
}

/** Python's str of a JSON value. */
export function pyStr(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : String(value);
  return pyRepr(value);
}

/**
 * One `[key]`/`.attr` step of a field name. `attributes` says whether the value answers `.attr` (the node is
 * an object in Ironic; inventories and plugin data are dicts, which do not).
 */
function step(value: unknown, key: string, how: { kind: "item" | "attr"; attributes: boolean }): unknown {
  const { kind, attributes } = how;
  if (kind === "attr") {
    if (
      !attributes ||
      value === null ||
      typeof value !== "object" ||
      Array.isArray(value) ||
      !Object.hasOwn(value, key)
    )
      throw new FormatError("AttributeError", `object has no attribute '${key}'`);
    return (value as Record<string, unknown>)[key];
  }
  if (Array.isArray(value)) {
    if (!/^\d+$/.test(key))
      throw new FormatError("TypeError", "list indices must be integers or slices, not str");
    const index = Number(key);
    if (index >= value.length) throw new FormatError("IndexError", "list index out of range");
    return value[index];
  }
  if (value !== null && typeof value === "object" && !attributes) {
    // NOTE: Python tries an all-digit key as an int, which a JSON object never holds
    if (/^\d+$/.test(key) || !Object.hasOwn(value, key)) throw new FormatError("KeyError", `'${key}'`);
    return (value as Record<string, unknown>)[key];
  }
  throw new FormatError("TypeError", "object is not subscriptable");
}

/** The value a replacement field names, e.g. `inventory[cpu][count]`. */
function lookup(
  field: string,
  context: Readonly<Record<string, unknown>>,
  objects: ReadonlySet<string>,
): unknown {
  const head = /^[^.[]*/.exec(field)![0];
  if (head === "" || /^\d+$/.test(head))
    throw new FormatError("IndexError", "positional fields are not supported");
  if (!Object.hasOwn(context, head)) throw new FormatError("KeyError", `'${head}'`);
  let value = context[head];
  let attributes = objects.has(head);
  let rest = field.slice(head.length);
  while (rest.length > 0) {
    const attr = /^\.([^.[]+)/.exec(rest);
    const item = /^\[([^\]]+)\]/.exec(rest);
    if (attr) {
      value = step(value, attr[1]!, { kind: "attr", attributes });
      rest = rest.slice(attr[0].length);
    } else if (item) {
      value = step(value, item[1]!, { kind: "item", attributes });
      rest = rest.slice(item[0].length);
    } else throw new FormatError("ValueError", "Only '.' or '[' may follow ']' in format field specifier");
    // NOTE: what an object's attribute holds (node.properties) is a dict again
    attributes = false;
  }
  return value;
}

/**
 * `template.format(**context)`. Names in `objects` answer `.attr` (Ironic's node object); others are dicts.
 * @throws FormatError as Python would raise
 */
export function pyFormat(
  template: string,
  context: Readonly<Record<string, unknown>>,
  objects: ReadonlySet<string> = new Set(),
): string {
  let out = "";
  let i = 0;
  while (i < template.length) {
    const c = template[i]!;
    if (c === "{" && template[i + 1] === "{") {
      out += "{";
      i += 2;
    } else if (c === "}" && template[i + 1] === "}") {
      out += "}";
      i += 2;
    } else if (c === "}") {
      throw new FormatError("ValueError", "Single '}' encountered in format string");
    } else if (c === "{") {
      const end = template.indexOf("}", i);
      if (end < 0) throw new FormatError("ValueError", "expected '}' before end of string");
      const field = template.slice(i + 1, end);
      if (/[!:{]/.test(field.replace(/\[[^\]]*\]/g, "")))
        throw new FormatError("ValueError", "conversions and format specs are not supported");
      out += pyStr(lookup(field, context, objects));
      i = end + 1;
    } else {
      out += c;
      i += 1;
    }
  }
  return out;
}
