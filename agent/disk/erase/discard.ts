import type { DiskTools } from "../../hardware/disk-tools.ts";

/**
 * Discards every block (or, with zeroOut, has the device write zeros itself: WRITE ZEROES). Only an erase
 * when the device promises zeros back, which the selection checked and the verify pass checks again.
 * @throws Error with blkdiscard's (or fallocate's) complaint
 */
export async function discardDisk(
  device: string,
  options: { tools: DiskTools; zeroOut: boolean; signal?: AbortSignal },
): Promise<void> {
  await options.tools.discard(device, { zeroOut: options.zeroOut, signal: options.signal });
}
