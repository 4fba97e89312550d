import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { binaryCopyRows } from "../../conductor/db/postgres/copy-binary.ts";
import { rawAscii, rawBytes, rawText } from "../../conductor/db/sql/raw-rows.ts";

const SIGNATURE = Buffer.from("PGCOPY\n\xff\r\n\0", "latin1");

/** A binary COPY stream as PostgreSQL writes one (header, rows, trailer), from the format's description. */
function copyStream(rows: readonly (readonly (Buffer | null)[])[], extension = Buffer.alloc(0)): Buffer {
  const parts: Buffer[] = [SIGNATURE, Buffer.alloc(8)];
  parts[1]!.writeUInt32BE(extension.length, 4);
  parts.push(extension);
  for (const row of rows) {
    const count = Buffer.alloc(2);
    count.writeInt16BE(row.length);
    parts.push(count);
    for (const field of row) {
      const length = Buffer.alloc(4);
      length.writeInt32BE(field === null ? -1 : field.length);
      parts.push(length);
      if (field !== null) parts.push(field);
    }
  }
  parts.push(Buffer.from([0xff, 0xff]));
  return Buffer.concat(parts);
}

const field = fc.option(
  fc.uint8Array({ maxLength: 40 }).map((bytes) => Buffer.from(bytes)),
  { freq: 4 },
);
const table = fc
  .integer({ min: 1, max: 6 })
  .chain((columns) =>
    fc.tuple(
      fc.constant(columns),
      fc.array(fc.array(field, { minLength: columns, maxLength: columns }), { maxLength: 150 }),
    ),
  );

describe("binary COPY rows (binaryCopyRows)", () => {
  it("property: reads back every field of any rows, NULLs as NULL, bytes as written", () => {
    fc.assert(
      fc.property(table, fc.uint8Array({ maxLength: 8 }), ([columns, rows], extension) => {
        const raw = binaryCopyRows(copyStream(rows, Buffer.from(extension)), columns);
        expect(raw.rows).toBe(rows.length);
        rows.forEach((row, r) =>
          row.forEach((value, c) => {
            const read = rawBytes(raw, r, c);
            expect(read === null ? null : Buffer.from(read)).toEqual(value);
          }),
        );
      }),
      { numRuns: 300 },
    );
  });

  it("property: a stream cut short anywhere is refused, never read as fewer rows", () => {
    fc.assert(
      fc.property(table, fc.nat(), ([columns, rows], at) => {
        const whole = copyStream(rows);
        const cut = whole.subarray(0, at % whole.length);
        expect(() => binaryCopyRows(cut, columns)).toThrow(/binary COPY/);
      }),
      { numRuns: 300 },
    );
  });

  it("refuses another header, a row of another width and bytes after the trailer", () => {
    const good = copyStream([[Buffer.from("a"), null]]);
    expect(binaryCopyRows(good, 2).rows).toBe(1);
    const header = Buffer.from(good);
    header[0] = 0x70;
    expect(() => binaryCopyRows(header, 2)).toThrow("no PGCOPY header");
    const oids = Buffer.from(good);
    oids.writeUInt32BE(1 << 16, SIGNATURE.length);
    expect(() => binaryCopyRows(oids, 2)).toThrow("header flags");
    expect(() => binaryCopyRows(good, 3)).toThrow("a row of 2 fields, not 3");
    expect(() => binaryCopyRows(Buffer.concat([good, Buffer.from([0])]), 2)).toThrow("after the trailer");
    const negative = copyStream([[Buffer.from("abcd")]]);
    negative.writeInt32BE(-2, SIGNATURE.length + 8 + 2);
    expect(() => binaryCopyRows(negative, 1)).toThrow("a field past the end");
  });

  it("reads fields as text (UTF-8) and as ASCII (a byte above it stays one character)", () => {
    const raw = binaryCopyRows(copyStream([[Buffer.from("é😀"), Buffer.from([0x31, 0xc3, 0xa9]), null]]), 3);
    expect(rawText(raw, 0, 0)).toBe("é😀");
    expect(rawAscii(raw, 0, 1)).toBe("1\u00c3\u00a9");
    expect(rawText(raw, 0, 2)).toBeNull();
    expect(rawAscii(raw, 0, 2)).toBeNull();
  });
});
