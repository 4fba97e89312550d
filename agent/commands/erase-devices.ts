import type { CommandHandler } from "./command.ts";
import { eraseDisks } from "./erase-disks.ts";

/**
 * erase_devices: every disk (or the named ones) erased by the best method it supports — NVMe sanitize or
 * format, ATA secure erase, a discard that reads back as zeros, or overwriting — and verified by reading
 * samples back. With `express`, IPA's erase_devices_express: fast methods only, the metadata erase otherwise.
 * The result lists each disk: method, verified, bytes, seconds, or why it was skipped.
 */
export const eraseDevices: CommandHandler<"erase_devices"> = (args, context) =>
  eraseDisks(
    {
      step: args.express ? "erase_devices_express" : "erase_devices",
      mode: args.express ? "express" : "full",
      options: args,
    },
    context,
  );
