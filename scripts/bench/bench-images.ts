import { randomBytes } from "node:crypto";
import { open, truncate, writeFile } from "node:fs/promises";

const MiB = 1024 * 1024;

/** A raw image of `size` bytes with `fraction` of its MiBs random and the rest zeros (a sparse file). */
export async function makeSparseImage(path: string, size: number, fraction: number): Promise<void> {
  await writeFile(path, "");
  await truncate(path, size);
  const handle = await open(path, "r+");
  try {
    const block = randomBytes(MiB);
    for (let at = 0; at < size; at += MiB) {
      // Deterministic spread: every tenth MiB (plus a little jitter) carries data.
      if ((at / MiB) % Math.round(1 / fraction) === 0) {
        block.writeUInt32LE(at / MiB, 0);
        await handle.write(block, 0, MiB, at);
      }
    }
  } finally {
    await handle.close();
  }
}
