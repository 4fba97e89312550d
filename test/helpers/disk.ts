import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import { runOk } from "./run.ts";

export const MiB = 1024 * 1024;

export const sha256 = (data: Buffer): string => createHash("sha256").update(data).digest("hex");

/** Up to `length` bytes of a file or block device from `start` (fewer at its end). */
export async function readRange(file: string, start: number, length: number): Promise<Buffer> {
  const handle = await open(file, "r");
  try {
    const buffer = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buffer, 0, length, start);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/** Copies a raw image to `raw` with its zero runs as holes, and writes bmaptool's block map of the copy to `bmap`. */
export async function sparseCopyWithBlockMap(source: string, raw: string, bmap: string): Promise<void> {
  await runOk("cp", ["--sparse=always", source, raw]);
  await runOk("bmaptool", ["create", raw, "-o", bmap]);
}
