const MASK = "******";
/** Keys whose values never enter the history: credentials, and config drives (user data may hold secrets). */
const SECRET = /password|secret|token|_key$|^key$|configdrive|user_data|credential/i;

/** A deep copy with every secret-looking key's value replaced by "******". Pure. */
export function maskDeep(value: unknown, depth = 0): unknown {
  if (depth > 20) return MASK; // hostile nesting: stop, don't recurse forever
  if (Array.isArray(value)) return value.map((v) => maskDeep(v, depth + 1));
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value))
      out[key] = SECRET.test(key) && v != null ? MASK : maskDeep(v, depth + 1);
    return out;
  }
  return value;
}

/** JSON Patch operations with their values masked when the path names a secret (/driver_info/ipmi_password). */
export function maskPatch(ops: unknown): unknown {
  if (!Array.isArray(ops)) return maskDeep(ops);
  return ops.map((op: unknown) => {
    if (op === null || typeof op !== "object") return op;
    const { path, value, ...rest } = op as { path?: unknown; value?: unknown };
    const secretPath = typeof path === "string" && path.split("/").some((segment) => SECRET.test(segment));
    return {
      ...rest,
      path,
      ...(value === undefined ? {} : { value: secretPath ? MASK : maskDeep(value) }),
    };
  });
}
