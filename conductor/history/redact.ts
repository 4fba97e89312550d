import { MASK, isSecretKey, maskSecrets } from "../../shared/secrets.ts";

/** Besides credentials, config drives and user data never enter the history (they may hold secrets). */
const HISTORY_ONLY = /configdrive|user_data/i;
const isHidden = (key: string): boolean => isSecretKey(key) || HISTORY_ONLY.test(key);

/** A copy with every secret-looking key's value replaced by "******", at any depth (shared/secrets.ts). */
export function maskDeep(value: unknown): unknown {
  return maskSecrets(value, isHidden);
}

/** JSON Patch operations with their values masked when the path names a secret (/driver_info/ipmi_password). */
export function maskPatch(ops: unknown): unknown {
  if (!Array.isArray(ops)) return maskDeep(ops);
  return ops.map((op: unknown) => {
    if (op === null || typeof op !== "object") return op;
    const { path, value, ...rest } = op as { path?: unknown; value?: unknown };
    const secretPath = typeof path === "string" && path.split("/").some((segment) => isHidden(segment));
    return {
      ...rest,
      path,
      ...(value === undefined ? {} : { value: secretPath ? MASK : maskDeep(value) }),
    };
  });
}
