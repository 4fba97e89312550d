/**
 * The few parts of POSIX tar (ustar) deploy logs need: reading the agent's archive, bounded because its
 * bytes come from the node, and writing the stored one. Regular files only; directories, links and devices
 * are skipped when read and never written.
 */

const BLOCK = 512;

export interface TarEntry {
  /** A relative path without `.` or `..` segments (`dmesg.txt`, `journal/agent.log`). */
  name: string;
  data: Buffer;
}

export interface TarLimits {
  /** Files kept at most; an archive with more is refused. */
  maxEntries: number;
  /** Bytes of file content in all, at most. */
  maxBytes: number;
}

/** The archive is not a tar a collector may store (malformed, or past a limit). */
export class TarError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TarError";
  }
}

function field(header: Buffer, start: number, length: number): string {
  const raw = header.subarray(start, start + length);
  const end = raw.indexOf(0);
  return raw.subarray(0, end < 0 ? length : end).toString("utf8");
}

function octal(header: Buffer, start: number, length: number): number {
  const text = field(header, start, length).trim();
  if (!/^[0-7]{1,12}$/.test(text)) throw new TarError(`bad number field ${JSON.stringify(text)}`);
  return parseInt(text, 8);
}

function checksumOf(header: Buffer): number {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (header[i] as number);
  return sum;
}

/** A stored name: `./a/b` → `a/b`; null for names that would leave the archive's root or are empty. */
export function safeEntryName(raw: string): string | null {
  const parts = raw.split("/").filter((part) => part !== "" && part !== ".");
  if (parts.length === 0 || parts.some((part) => part === ".." || part.includes("\\"))) return null;
  if (parts.some((part) => [...part].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f)))
    return null;
  const name = parts.join("/");
  return name.length <= 255 ? name : null;
}

/**
 * The regular files of a tar archive, in order. Never reads past `archive`; stops at the end-of-archive
 * block (or the buffer's end on a block boundary). @throws TarError on a malformed header or past a limit
 */
export function readTar(archive: Buffer, limits: TarLimits): TarEntry[] {
  const entries: TarEntry[] = [];
  let total = 0;
  let offset = 0;
  while (offset + BLOCK <= archive.length) {
    const header = archive.subarray(offset, offset + BLOCK);
    if (header.every((byte) => byte === 0)) break;
    if (octal(header, 148, 8) !== checksumOf(header)) throw new TarError(`bad header checksum at ${offset}`);
    const size = octal(header, 124, 12);
    const type = String.fromCharCode(header[156] as number);
    const dataStart = offset + BLOCK;
    if (dataStart + size > archive.length) throw new TarError("an entry runs past the archive's end");
    const ustar = field(header, 257, 6) === "ustar";
    const prefix = ustar ? field(header, 345, 155) : "";
    const rawName = prefix === "" ? field(header, 0, 100) : `${prefix}/${field(header, 0, 100)}`;
    const name = safeEntryName(rawName);
    if ((type === "0" || type === "\0") && name !== null) {
      if (entries.length >= limits.maxEntries) throw new TarError(`more than ${limits.maxEntries} files`);
      total += size;
      if (total > limits.maxBytes) throw new TarError(`more than ${limits.maxBytes} bytes of files`);
      entries.push({ name, data: Buffer.from(archive.subarray(dataStart, dataStart + size)) });
    }
    offset = dataStart + Math.ceil(size / BLOCK) * BLOCK;
  }
  return entries;
}

/** Writes `value` into the header's field [start, start + length). */
function put(header: Buffer, [start, length]: readonly [number, number], value: string | number): void {
  const text = typeof value === "number" ? `${value.toString(8).padStart(length - 1, "0")}\0` : value;
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length > length) throw new TarError(`${JSON.stringify(text)} does not fit a tar header`);
  bytes.copy(header, start);
}

/** A ustar archive of regular files (mode 0644, owner root) dated `mtime`. @throws TarError for a long name */
export function writeTar(entries: readonly TarEntry[], mtime: Date): Buffer {
  const blocks: Buffer[] = [];
  for (const entry of entries) {
    const header = Buffer.alloc(BLOCK);
    const name = Buffer.byteLength(entry.name) <= 100 ? entry.name : null;
    if (name === null) throw new TarError(`name longer than 100 bytes: ${entry.name}`);
    put(header, [0, 100], name);
    put(header, [100, 8], 0o644);
    put(header, [108, 8], 0);
    put(header, [116, 8], 0);
    put(header, [124, 12], entry.data.length);
    put(header, [136, 12], Math.floor(mtime.getTime() / 1000));
    header[156] = "0".charCodeAt(0);
    put(header, [257, 6], "ustar");
    put(header, [263, 2], "00");
    put(header, [265, 32], "root");
    put(header, [297, 32], "root");
    put(header, [148, 8], `${checksumOf(header).toString(8).padStart(6, "0")}\0 `);
    blocks.push(header, entry.data);
    const pad = (BLOCK - (entry.data.length % BLOCK)) % BLOCK;
    if (pad > 0) blocks.push(Buffer.alloc(pad));
  }
  blocks.push(Buffer.alloc(2 * BLOCK));
  return Buffer.concat(blocks);
}
