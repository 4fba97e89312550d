import type { Logger } from "../../../shared/log.ts";
import { eraseDeviceMetadata } from "../erase-metadata.ts";
import type { Sample } from "./verify.ts";

/**
 * The metadata erase (partition tables, RAID superblocks, filesystem signatures) and the regions the
 * verify pass reads after it: the ends of the disk it zeroed.
 * @throws as eraseDeviceMetadata (EraseError when wipefs fails, fs errors)
 */
export async function eraseMetadata(
  device: string,
  options: { size: number; signal?: AbortSignal; logger?: Logger },
): Promise<{ bytes: number; samples: Sample[] }> {
  const result = await eraseDeviceMetadata(device, { signal: options.signal, logger: options.logger });
  const zap = Math.min(result.zapped_bytes, options.size);
  const samples: Sample[] = [{ offset: 0, length: zap }];
  if (options.size > zap) {
    const tail = Math.min(zap, options.size - zap);
    samples.push({ offset: options.size - tail, length: tail });
  }
  return { bytes: samples.reduce((sum, sample) => sum + sample.length, 0), samples };
}
