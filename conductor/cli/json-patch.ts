/** JSON Patch operations built from KEY=VALUE options (`node set --property k=v`). */

export interface PatchOp {
  op: "add" | "replace" | "remove";
  path: string;
  value?: unknown;
}

/** RFC 6901: "~" and "/" inside a key. */
export function pointerSegment(key: string): string {
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** One `add` per key under `/field/...` (add replaces an existing member). */
export function addOps(field: string, values: Record<string, unknown>): PatchOp[] {
  return Object.entries(values).map(([key, value]) => ({
    op: "add",
    path: `/${field}/${pointerSegment(key)}`,
    value,
  }));
}
