import { constants } from "node:fs";
import { open } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";

/** O_DIRECT wants memory, offsets and lengths aligned to the logical block size; 4 KiB suits every disk. */
export const ALIGN = 4096;

/** A handle plus memory the kernel accepts for O_DIRECT transfers on it (or buffered I/O, when it cannot). */
export interface AlignedHandle {
  handle: FileHandle;
  memory: Buffer;
  direct: boolean;
}

/**
 * Opens `path` for O_DIRECT (like dd iflag/oflag=direct, so erasing neither fills nor trusts the page cache)
 * with `bytes` of memory aligned for it. Node cannot tell a buffer's address: each 16-byte shift of a
 * slightly larger buffer is tried with a 4 KiB read at offset 0 until the kernel accepts one. Falls back to
 * buffered I/O where O_DIRECT is refused (tmpfs) or the device is smaller than one aligned block.
 * @throws the open(2) error (ENOENT, EACCES, EROFS)
 */
export async function openAligned(
  path: string,
  options: { bytes: number; write: boolean },
): Promise<AlignedHandle> {
  const mode = options.write ? constants.O_RDWR : constants.O_RDONLY;
  const raw = Buffer.allocUnsafeSlow(options.bytes + ALIGN);
  const direct = await open(path, mode | constants.O_DIRECT).catch(() => undefined);
  if (direct) {
    for (let shift = 0; shift < ALIGN; shift += 16) {
      try {
        await direct.read(raw, shift, ALIGN, 0);
        return { handle: direct, memory: raw.subarray(shift, shift + options.bytes), direct: true };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EINVAL") break;
      }
    }
    await direct.close();
  }
  return {
    handle: await open(path, options.write ? "r+" : "r"),
    memory: raw.subarray(0, options.bytes),
    direct: false,
  };
}

/** Writes all of `data` at `position` (write(2) may write less than asked). */
export async function writeFully(handle: FileHandle, data: Buffer, position: number): Promise<void> {
  let done = 0;
  while (done < data.length) {
    const { bytesWritten } = await handle.write(data, done, data.length - done, position + done);
    done += bytesWritten;
  }
}

/** Reads `into.length` bytes at `position`; fewer only at the end of the device. */
export async function readFully(handle: FileHandle, into: Buffer, position: number): Promise<number> {
  let done = 0;
  while (done < into.length) {
    const { bytesRead } = await handle.read(into, done, into.length - done, position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done;
}
