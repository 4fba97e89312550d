import { open } from "node:fs/promises";
import { CodedError } from "../../shared/errors.ts";
import type { Disk } from "../../shared/inventory.ts";
import type { CommandContext, CommandHandler } from "./command.ts";

const CHUNK = 4 * 1024 * 1024;
const PROGRESS_EVERY_MS = 1_000;

/**
 * Full erase: overwrites every byte of each disk (or of the named ones) with zeros, reporting progress.
 * This is IPA's last-resort method (shred); firmware secure erase (ATA, NVMe format) is not used yet.
 */
export const eraseDevices: CommandHandler<"erase_devices"> = async (args, context) => {
  const disks = await context.backend.disks();
  const devices = args.devices ?? disks.map((disk) => disk.name);
  const unknown = devices.filter((device) => !disks.some((disk) => disk.name === device));
  if (unknown.length > 0)
    throw new CodedError("BAD_ARGS", `not disks of this machine: ${unknown.join(", ")}`);
  const erased: Array<{ device: string; bytes: number; method: "zero-fill" }> = [];
  for (const disk of disks.filter((candidate) => devices.includes(candidate.name))) {
    erased.push({ device: disk.name, bytes: await zeroFill(disk, context), method: "zero-fill" });
  }
  return { devices: erased };
};

/** @throws the signal's reason when cancelled; fs errors (EACCES, EIO) as they come. */
async function zeroFill(disk: Disk, { signal, progress, logger }: CommandContext): Promise<number> {
  const handle = await open(disk.name, "r+");
  try {
    // A block device stats as size 0, so its size comes from the inventory (sysfs); a file is its length.
    const info = await handle.stat();
    const size = info.isFile() ? info.size : disk.size;
    const zeros = Buffer.alloc(CHUNK);
    const started = Date.now();
    let lastReport = 0;
    for (let offset = 0; offset < size; offset += CHUNK) {
      signal.throwIfAborted();
      const length = Math.min(CHUNK, size - offset);
      await handle.write(zeros, 0, length, offset);
      const now = Date.now();
      const done = offset + length;
      if (now - lastReport >= PROGRESS_EVERY_MS || done === size) {
        lastReport = now;
        const seconds = Math.max((now - started) / 1000, 0.001);
        progress({
          step: `erase_devices ${disk.name}`,
          bytes_done: done,
          bytes_total: size,
          rate_bps: Math.round(done / seconds),
        });
      }
    }
    await handle.sync();
    logger.info({ device: disk.name, bytes: size }, "device erased");
    return size;
  } finally {
    await handle.close();
  }
}
