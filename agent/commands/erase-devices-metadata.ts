import { EraseOptionsSchema } from "../../shared/erase.ts";
import type { CommandHandler } from "./command.ts";
import { eraseDisks } from "./erase-disks.ts";

/**
 * Wipes partition tables, RAID superblocks and filesystem signatures of every disk (or the named ones),
 * in parallel, skipping read-only disks and those the node's skip_block_devices names.
 */
export const eraseDevicesMetadata: CommandHandler<"erase_devices_metadata"> = (args, context) =>
  eraseDisks(
    { step: "erase_devices_metadata", mode: "metadata", options: EraseOptionsSchema.parse(args) },
    context,
  );
