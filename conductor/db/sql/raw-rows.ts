/**
 * Rows as the database sent their bytes, not a string per field: each field's `[start, end)` in `data` at
 * `bounds[(row × columns + column) × 2]`, start -1 for NULL. Text fields are UTF-8.
 */
export interface RawFields {
  readonly data: Buffer;
  readonly rows: number;
  readonly columns: number;
  readonly bounds: Int32Array;
}

/** Raw fields whose `data` its reader gives back. */
export interface RawRows extends RawFields {
  /** Gives `data` back to be reused: no view of it (a field's bytes) may be read after. */
  release(): void;
}

/** A field as text, or null. */
export function rawText(raw: RawFields, row: number, column: number): string | null {
  const slot = (row * raw.columns + column) * 2;
  const start = raw.bounds[slot]!;
  return start < 0 ? null : raw.data.toString("utf8", start, raw.bounds[slot + 1]);
}

/** A field as ASCII text (each byte one character: exact for ASCII, and a byte above it never reads as ASCII). */
export function rawAscii(raw: RawFields, row: number, column: number): string | null {
  const slot = (row * raw.columns + column) * 2;
  const start = raw.bounds[slot]!;
  return start < 0 ? null : raw.data.toString("latin1", start, raw.bounds[slot + 1]);
}

/** A field's bytes (a view into `data`, not a copy), or null. */
export function rawBytes(raw: RawFields, row: number, column: number): Buffer | null {
  const slot = (row * raw.columns + column) * 2;
  const start = raw.bounds[slot]!;
  return start < 0 ? null : raw.data.subarray(start, raw.bounds[slot + 1]);
}
