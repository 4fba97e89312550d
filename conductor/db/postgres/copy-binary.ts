import type { RawFields } from "../sql/raw-rows.ts";

/** The 11 bytes every binary COPY stream opens with (PostgreSQL's COPY, "Binary Format"). */
const SIGNATURE = Buffer.from("PGCOPY\n\xff\r\n\0", "latin1");

/**
 * The rows of a binary COPY stream (`COPY … TO STDOUT (FORMAT binary)`) of `columns` columns: where each field
 * lies in `data`, without a string made per field. Header, then per row a 16-bit field count and per field a
 * 32-bit length (-1: NULL) and its bytes, then the 16-bit -1 trailer.
 * @throws on a stream that is not one: a bad header, a row of another width, a field past the end, no trailer
 */
export function binaryCopyRows(data: Buffer, columns: number): RawFields {
  if (data.length < SIGNATURE.length + 8 || !data.subarray(0, SIGNATURE.length).equals(SIGNATURE))
    throw new Error("binary COPY: no PGCOPY header");
  // the flags word (bit 16: OIDs included, which this reader does not expect) and the extension's length
  if (data.readUInt32BE(SIGNATURE.length) !== 0) throw new Error("binary COPY: unexpected header flags");
  let at = SIGNATURE.length + 8 + data.readUInt32BE(SIGNATURE.length + 4);
  let bounds = new Int32Array(64 * columns * 2);
  let rows = 0;
  for (;;) {
    if (at + 2 > data.length) throw new Error("binary COPY: ends without its trailer");
    const count = data.readInt16BE(at);
    at += 2;
    if (count === -1) break;
    if (count !== columns) throw new Error(`binary COPY: a row of ${count} fields, not ${columns}`);
    if ((rows + 1) * columns * 2 > bounds.length) {
      const grown = new Int32Array(bounds.length * 2);
      grown.set(bounds);
      bounds = grown;
    }
    for (let c = 0; c < columns; c++) {
      if (at + 4 > data.length) throw new Error("binary COPY: a field's length past the end");
      const length = data.readInt32BE(at);
      at += 4;
      const slot = (rows * columns + c) * 2;
      if (length === -1) {
        bounds[slot] = -1;
        bounds[slot + 1] = -1;
        continue;
      }
      if (length < 0 || at + length > data.length) throw new Error("binary COPY: a field past the end");
      bounds[slot] = at;
      bounds[slot + 1] = at + length;
      at += length;
    }
    rows++;
  }
  if (at !== data.length) throw new Error("binary COPY: bytes after the trailer");
  return { data, rows, columns, bounds };
}
