/**
 * The tar archives of deploy logs, through tar-stream (a maintained parser: the agent's archive comes from the
 * node): reading it bounded by a file count and a byte total, and writing the stored one. Regular files only;
 * directories, links and devices are skipped when read and never written.
 */
import { extract, pack } from "tar-stream";

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
 * The regular files of a tar archive, in order, read by tar-stream. @throws TarError on a malformed archive
 * or past a limit (checked as each header arrives, before its data is buffered)
 */
export async function readTar(archive: Buffer, limits: TarLimits): Promise<TarEntry[]> {
  const entries: TarEntry[] = [];
  let total = 0;
  const parser = extract();
  const done = new Promise<void>((resolve, reject) => {
    parser.on("entry", (header, stream, next) => {
      const name = safeEntryName(header.name);
      const size = header.size ?? 0;
      const keep = header.type === "file" && name !== null;
      if (keep && entries.length >= limits.maxEntries) {
        reject(new TarError(`more than ${limits.maxEntries} files`));
        parser.destroy();
        return;
      }
      if (keep && total + size > limits.maxBytes) {
        reject(new TarError(`more than ${limits.maxBytes} bytes of files`));
        parser.destroy();
        return;
      }
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => {
        if (keep) chunks.push(chunk);
      });
      stream.on("end", () => {
        if (keep && name !== null) {
          total += size;
          entries.push({ name, data: Buffer.concat(chunks) });
        }
        next();
      });
      stream.on("error", reject);
    });
    parser.on("finish", resolve);
    parser.on("error", (error: Error) =>
      reject(error instanceof TarError ? error : new TarError(`malformed tar: ${error.message}`)),
    );
  });
  parser.end(archive);
  await done;
  return entries;
}

/**
 * A tar of regular files (mode 0644, owner root) dated `mtime`; a name past ustar's 100 bytes (readTar keeps
 * up to 255) gets a pax header from tar-stream, so every file read can be written back.
 */
export async function writeTar(entries: readonly TarEntry[], mtime: Date): Promise<Buffer> {
  const archive = pack();
  const chunks: Buffer[] = [];
  archive.on("data", (chunk: Buffer) => chunks.push(chunk));
  const ended = new Promise<void>((resolve, reject) => {
    archive.on("end", resolve);
    archive.on("error", reject);
  });
  for (const entry of entries) {
    archive.entry(
      { name: entry.name, mode: 0o644, uid: 0, gid: 0, uname: "root", gname: "root", mtime },
      entry.data,
    );
  }
  archive.finalize();
  await ended;
  return Buffer.concat(chunks);
}
