import { randomBytes } from "node:crypto";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, relative, resolve } from "node:path";

/**
 * Joins a root dir and a relative file name, refusing anything that would land outside the root.
 * Names are built from validated MACs and uuids; this is the second line of defence.
 * @throws Error when the result escapes the root.
 */
export function pathInside(root: string, name: string): string {
  const base = resolve(root);
  const full = resolve(base, name);
  const rel = relative(base, full);
  if (rel === "" || rel.startsWith("..") || isAbsolute(rel) || name.includes("\0")) {
    throw new Error(`refusing boot file path outside ${base}: ${JSON.stringify(name)}`);
  }
  return full;
}

/**
 * Writes a file so a concurrent reader (TFTP/HTTP server, dnsmasq) sees the old or the new content,
 * never a half-written one: write a temporary sibling, then rename over.
 */
export async function writeFileAtomic(path: string, content: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    await writeFile(temporary, content, { mode: 0o644 });
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

/** Removes a file; a file that is already gone is fine. */
export async function removeFile(path: string): Promise<void> {
  await rm(path, { force: true });
}
