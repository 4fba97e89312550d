import { readFile, readdir, readlink } from "node:fs/promises";

/** Reads a sysfs/procfs attribute, trimmed; null when absent or unreadable (sysfs is full of EINVAL). */
export async function readAttr(path: string): Promise<string | null> {
  try {
    return (await readFile(path, "utf8")).trim();
  } catch {
    return null;
  }
}

/** A non-empty attribute or null. */
export async function readNonEmpty(path: string): Promise<string | null> {
  const value = await readAttr(path);
  return value === null || value === "" ? null : value;
}

export async function readInt(path: string): Promise<number | null> {
  const value = await readAttr(path);
  if (value === null || value === "") return null;
  const parsed = Number.parseInt(value, 10);
  return Number.isFinite(parsed) ? parsed : null;
}

export async function listDir(path: string): Promise<string[]> {
  try {
    return await readdir(path);
  } catch {
    return [];
  }
}

export async function linkTarget(path: string): Promise<string | null> {
  try {
    return await readlink(path);
  } catch {
    return null;
  }
}

export function basename(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}
